// Collective checks shared by the threads tests (test_comm) and the MPI program
// (test_comm_mpi): each runs one operation on every rank of a communicator with rank-valued
// inputs and compares with the closed-form answer, exactly (all values are small integers,
// exact in every dtype used). `async` selects the i... form with test()/wait().
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "origami/comm/communicator.h"

namespace origami::comm::testing {

inline void finish(Handle h, bool async) {
  if (async) {
    while (!h.test()) {
      // A real program computes here; the tests just let the progress threads run.
      std::this_thread::yield();
    }
  }
  h.wait();
}

template <class T>
std::vector<T> iota_values(std::int64_t n, double base) {
  std::vector<T> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<T>(base + static_cast<double>(i % 97));
  return v;
}

inline void check_p2p(Communicator& c, std::int64_t count, bool async) {
  const int n = c.size(), r = c.rank();
  auto out = iota_values<float>(count, 1000.0 * r);
  std::vector<float> in(static_cast<std::size_t>(count), -1.f);
  const int next = (r + 1) % n, prev = (r - 1 + n) % n;
  if (async) {
    Handle hr = c.irecv(in, prev, 7);
    Handle hs = c.isend(out, next, 7);
    finish(std::move(hr), true);
    finish(std::move(hs), true);
  } else if (n == 1) {
    Handle hr = c.irecv(in, prev, 7);
    c.send(out, next, 7);
    hr.wait();
  } else if (r % 2 == 0) {  // blocking forms need an order that cannot deadlock
    c.send(out, next, 7);
    c.recv(in, prev, 7);
  } else {
    c.recv(in, prev, 7);
    c.send(out, next, 7);
  }
  EXPECT_EQ(in, iota_values<float>(count, 1000.0 * prev)) << "rank " << r << " count " << count;
}

inline void check_broadcast(Communicator& c, std::int64_t count, int root, bool async) {
  auto expect = iota_values<double>(count, 10.0 * root + 3);
  std::vector<double> buf = c.rank() == root ? expect : std::vector<double>(static_cast<std::size_t>(count), -1);
  finish(c.ibroadcast(buf, root), async);
  EXPECT_EQ(buf, expect) << "broadcast rank " << c.rank() << " root " << root << " count " << count;
}

template <class T>
void check_reduce(Communicator& c, std::int64_t count, int root, ReduceOp op, bool async) {
  const int n = c.size(), r = c.rank();
  std::vector<T> in(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) in[i] = static_cast<T>((r + 1) * (i % 13 + 1));
  std::vector<T> out(c.rank() == root ? static_cast<std::size_t>(count) : 0);
  finish(c.ireduce(in, out, root, op), async);
  if (r != root) return;
  for (std::int64_t i = 0; i < count; ++i) {
    const double f = static_cast<double>(i % 13 + 1);
    const double want = op == ReduceOp::Sum ? f * n * (n + 1) / 2 : f * n;
    ASSERT_EQ(static_cast<double>(out[i]), want) << "reduce element " << i << " root " << root;
  }
}

inline void check_all_gather(Communicator& c, std::int64_t count, bool async) {
  const int n = c.size(), r = c.rank();
  auto in = iota_values<float>(count, 100.0 * r);
  std::vector<float> out(static_cast<std::size_t>(count * n), -1.f);
  finish(c.iall_gather(in, out), async);
  for (int k = 0; k < n; ++k) {
    auto want = iota_values<float>(count, 100.0 * k);
    ASSERT_TRUE(std::equal(want.begin(), want.end(), out.begin() + k * count)) << "block " << k;
  }
}

inline void check_all_gatherv(Communicator& c, bool async) {
  const int n = c.size(), r = c.rank();
  std::vector<std::int64_t> counts(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) counts[k] = (k * 5 + 2) % 4;  // includes zero-size blocks
  auto in = iota_values<std::int32_t>(counts[r], 100.0 * r);
  std::vector<std::int32_t> out(static_cast<std::size_t>(std::accumulate(counts.begin(), counts.end(), std::int64_t{0})), -1);
  finish(c.iall_gatherv(in, out, counts), async);
  std::int64_t off = 0;
  for (int k = 0; k < n; ++k) {
    auto want = iota_values<std::int32_t>(counts[k], 100.0 * k);
    ASSERT_TRUE(std::equal(want.begin(), want.end(), out.begin() + off)) << "block " << k;
    off += counts[k];
  }
}

template <class T>
void check_all_reduce(Communicator& c, std::int64_t count, ReduceOp op, bool async, bool in_place = false) {
  const int n = c.size(), r = c.rank();
  std::vector<T> in(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) in[i] = static_cast<T>((r + 1) * (i % 13 + 1));
  std::vector<T> out(static_cast<std::size_t>(count), T(-1));
  if (in_place) {
    finish(c.iall_reduce(in, in, op), async);
    out = in;
  } else {
    finish(c.iall_reduce(in, out, op), async);
  }
  for (std::int64_t i = 0; i < count; ++i) {
    const double f = static_cast<double>(i % 13 + 1);
    const double want = op == ReduceOp::Sum ? f * n * (n + 1) / 2 : f * n;
    ASSERT_EQ(static_cast<double>(out[i]), want) << "all_reduce element " << i << " of " << count;
  }
}

inline void check_reduce_scatter(Communicator& c, std::int64_t count, bool async) {
  const int n = c.size(), r = c.rank();
  std::vector<float> in(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) in[i] = static_cast<float>((r + 1) * (i % 13 + 1));
  const auto counts = balanced_counts(count, n);
  std::int64_t off = 0;
  for (int k = 0; k < r; ++k) off += counts[k];
  std::vector<float> out(static_cast<std::size_t>(counts[r]), -1.f);
  finish(c.ireduce_scatter(in, out, ReduceOp::Sum), async);
  for (std::int64_t i = 0; i < counts[r]; ++i) {
    ASSERT_EQ(out[i], static_cast<float>(((off + i) % 13 + 1) * n * (n + 1) / 2)) << "element " << i;
  }
}

inline void check_maxloc(Communicator& c, std::int64_t count, bool async) {
  const int n = c.size(), r = c.rank();
  std::vector<float> v(static_cast<std::size_t>(count));
  std::vector<std::int64_t> idx(static_cast<std::size_t>(count));
  auto value = [](int rank, std::int64_t i) { return static_cast<float>((rank * 7 + i * 3) % 5); };
  for (std::int64_t i = 0; i < count; ++i) {
    v[i] = value(r, i);
    idx[i] = 100 * r + i;
  }
  finish(c.iall_reduce_maxloc(v, idx), async);
  for (std::int64_t i = 0; i < count; ++i) {
    float best = -1;
    std::int64_t best_idx = -1;
    for (int k = 0; k < n; ++k) {
      if (value(k, i) > best) {  // strict: ties keep the smaller rank's (smaller) index
        best = value(k, i);
        best_idx = 100 * k + i;
      }
    }
    ASSERT_EQ(v[i], best) << "element " << i;
    ASSERT_EQ(idx[i], best_idx) << "element " << i;
  }
}

inline void check_all_to_all(Communicator& c, bool async) {
  const int n = c.size(), r = c.rank();
  auto cnt = [](int from, int to) { return static_cast<std::int64_t>((from + 2 * to) % 3); };
  std::vector<std::int64_t> sc(static_cast<std::size_t>(n)), rc(static_cast<std::size_t>(n));
  std::vector<std::int64_t> in;
  for (int j = 0; j < n; ++j) {
    sc[j] = cnt(r, j);
    rc[j] = cnt(j, r);
    for (std::int64_t k = 0; k < sc[j]; ++k) in.push_back(1000 * r + 10 * j + k);
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(std::accumulate(rc.begin(), rc.end(), std::int64_t{0})), -1);
  finish(c.iall_to_all(in, sc, out, rc), async);
  std::vector<std::int64_t> want;
  for (int i = 0; i < n; ++i) {
    for (std::int64_t k = 0; k < rc[i]; ++k) want.push_back(1000 * i + 10 * r + k);
  }
  EXPECT_EQ(out, want) << "all_to_all rank " << r;
}

// Every operation, sync and async, on sizes that include zero, one and non-multiples of n.
inline void check_everything(Communicator& c) {
  const int n = c.size();
  for (bool async : {false, true}) {
    for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2 * n + 1}, std::int64_t{1000}}) {
      check_p2p(c, count, async);
      check_broadcast(c, count, n - 1, async);
      check_reduce<float>(c, count, n / 2, ReduceOp::Sum, async);
      check_all_gather(c, count, async);
      check_reduce_scatter(c, count, async);
      check_all_reduce<float>(c, count, ReduceOp::Sum, async);
      check_maxloc(c, count, async);
    }
    check_broadcast(c, 300001, 0, async);  // several pipeline chunks (1.2 MB of f64)
    check_reduce<double>(c, 150001, 0, ReduceOp::Max, async);
    check_all_reduce<double>(c, 77, ReduceOp::Max, async, true);
    check_all_reduce<std::int64_t>(c, 31, ReduceOp::Sum, async);
    check_all_reduce<std::int32_t>(c, 5, ReduceOp::Max, async, true);
    check_all_gatherv(c, async);
    check_all_to_all(c, async);
    finish(c.ibarrier(), async);
  }
}

// --- cost formulas of collectives/*.cpp, per rank, in bytes: {sent, received}

struct Bytes {
  std::int64_t sent = 0, received = 0;
};

inline Bytes ring_all_gather_cost(const std::vector<std::int64_t>& c, int r) {
  const int n = static_cast<int>(c.size());
  const std::int64_t t = std::accumulate(c.begin(), c.end(), std::int64_t{0});
  if (n == 1) return {};
  return {t - c[(r + 1) % n], t - c[r]};
}
inline Bytes ring_reduce_scatter_cost(const std::vector<std::int64_t>& c, int r) {
  const int n = static_cast<int>(c.size());
  const std::int64_t t = std::accumulate(c.begin(), c.end(), std::int64_t{0});
  if (n == 1) return {};
  return {t - c[r], t - c[(r - 1 + n) % n]};
}
inline Bytes ring_all_reduce_cost(std::int64_t count, std::int64_t e, int n, int r) {
  auto c = balanced_counts(count, n);
  for (auto& x : c) x *= e;
  auto a = ring_reduce_scatter_cost(c, r), b = ring_all_gather_cost(c, r);
  return {a.sent + b.sent, a.received + b.received};
}
inline Bytes chain_broadcast_cost(std::int64_t bytes, int n, int r, int root) {
  const int v = (r - root + n) % n;
  return {v < n - 1 ? bytes : 0, v > 0 ? bytes : 0};
}
inline Bytes chain_reduce_cost(std::int64_t bytes, int n, int r, int root) {
  const int v = (r - root + n) % n;
  return {v > 0 ? bytes : 0, v < n - 1 ? bytes : 0};
}

inline void expect_bytes(Communicator& c, const std::string& kind, Bytes want) {
  const auto s = c.stats().op(kind);
  EXPECT_EQ(s.bytes_sent, want.sent) << kind << " sent, rank " << c.rank() << " of " << c.size();
  EXPECT_EQ(s.bytes_received, want.received) << kind << " received, rank " << c.rank() << " of " << c.size();
  EXPECT_EQ(s.calls, 1) << kind;
}

// Runs each collective once after a reset and compares the measured bytes with the formulas.
inline void check_bytes_equal_formulas(Communicator& c) {
  const int n = c.size(), r = c.rank();
  for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{3 * n + 2}, std::int64_t{200003}}) {
    c.reset_stats();
    check_all_reduce<float>(c, count, ReduceOp::Sum, true);
    expect_bytes(c, "all_reduce", ring_all_reduce_cost(count, 4, n, r));
    check_all_gather(c, count, false);
    expect_bytes(c, "all_gather", ring_all_gather_cost(std::vector<std::int64_t>(n, count * 4), r));
    check_reduce_scatter(c, count, false);
    {
      auto b = balanced_counts(count, n);
      for (auto& x : b) x *= 4;
      expect_bytes(c, "reduce_scatter", ring_reduce_scatter_cost(b, r));
    }
    check_broadcast(c, count, n - 1, false);
    expect_bytes(c, "broadcast", chain_broadcast_cost(count * 8, n, r, n - 1));
    check_reduce<double>(c, count, n / 2, ReduceOp::Sum, false);
    expect_bytes(c, "reduce", chain_reduce_cost(count * 8, n, r, n / 2));
    check_maxloc(c, count, false);
    expect_bytes(c, "all_reduce_maxloc", ring_all_reduce_cost(count, 16, n, r));
  }
  c.reset_stats();
  check_all_gatherv(c, false);
  {
    std::vector<std::int64_t> counts(static_cast<std::size_t>(n));
    for (int k = 0; k < n; ++k) counts[k] = (k * 5 + 2) % 4 * 4;
    expect_bytes(c, "all_gather", ring_all_gather_cost(counts, r));
  }
  check_all_to_all(c, false);
  {
    Bytes want;
    for (int j = 0; j < n; ++j) {
      if (j == r) continue;
      want.sent += (r + 2 * j) % 3 * 8;
      want.received += (j + 2 * r) % 3 * 8;
    }
    expect_bytes(c, "all_to_all", want);
  }
  c.barrier();
  expect_bytes(c, "barrier", {0, 0});
  int rounds = 0;
  for (int d = 1; d < n; d *= 2) ++rounds;
  EXPECT_EQ(c.stats().op("barrier").messages_sent, rounds);
  // User point-to-point: exactly the payload.
  c.reset_stats();
  check_p2p(c, 33, true);
  EXPECT_EQ(c.stats().op("send").bytes_sent, 33 * 4);
  EXPECT_EQ(c.stats().op("recv").bytes_received, 33 * 4);
}

}  // namespace origami::comm::testing
