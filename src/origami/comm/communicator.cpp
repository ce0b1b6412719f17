#include "origami/comm/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "origami/comm/collectives/algorithms.h"
#include "origami/comm/comm_impl.h"
#include "origami/core/dry_run.h"
#include "origami/core/error.h"

namespace origami::comm {

using detail::CollectiveContext;
using detail::CommImpl;

std::vector<std::int64_t> balanced_counts(std::int64_t total, int parts) {
  ORIGAMI_CHECK(parts >= 1 && total >= 0, "cannot split {} elements into {} parts", total, parts);
  std::vector<std::int64_t> c(static_cast<std::size_t>(parts), total / parts);
  for (std::int64_t i = 0; i < total % parts; ++i) c[static_cast<std::size_t>(i)] += 1;
  return c;
}

double default_timeout_s() {
  const char* env = std::getenv("ORIGAMI_COMM_TIMEOUT_S");
  if (env == nullptr || *env == '\0') return 120.0;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(v > 0 && v <= kMaxTimeoutS)) {
    throw ConfigError(fmt::format("ORIGAMI_COMM_TIMEOUT_S='{}' is not a number of seconds in "
                                  "(0, {:g}]",
                                  env, kMaxTimeoutS));
  }
  return v;
}

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::int64_t sum(const std::vector<std::int64_t>& v) { return std::accumulate(v.begin(), v.end(), std::int64_t{0}); }

std::vector<std::int64_t> to_bytes(std::vector<std::int64_t> counts, DType t) {
  for (auto& c : counts) c *= static_cast<std::int64_t>(dtype_size(t));
  return counts;
}

bool overlaps(const void* a, std::int64_t an, const void* b, std::int64_t bn) {
  if (an == 0 || bn == 0 || a == nullptr || b == nullptr) return false;  // unbacked: dry run
  auto pa = reinterpret_cast<std::uintptr_t>(a);
  auto pb = reinterpret_cast<std::uintptr_t>(b);
  return pa < pb + static_cast<std::uintptr_t>(bn) && pb < pa + static_cast<std::uintptr_t>(an);
}

}  // namespace

// --- validation shared by the operations

namespace {

void check_buffer(const Communicator& c, const char* op, const char* which, const void* data, std::int64_t count) {
  ORIGAMI_CHECK(count >= 0, "{} on communicator '{}': {} has a negative count {}", op, c.name(), which, count);
  ORIGAMI_CHECK(count == 0 || data != nullptr || dryrun::active(),
                "{} on communicator '{}': {} has {} elements but no memory (an unbacked dry-run tensor?)", op,
                c.name(), which, count);
}
void check_same_dtype(const Communicator& c, const char* op, DType a, DType b) {
  ORIGAMI_CHECK(a == b, "{} on communicator '{}': input is {} but output is {}; they must match", op, c.name(),
                dtype_name(a), dtype_name(b));
}
void check_rank(const Communicator& c, const char* op, const char* what, int r) {
  ORIGAMI_CHECK(r >= 0 && r < c.size(), "{} on communicator '{}': {} {} is outside the group of size {}", op,
                c.name(), what, r, c.size());
}
void check_counts(const Communicator& c, const char* op, const char* what, const std::vector<std::int64_t>& v) {
  ORIGAMI_CHECK(static_cast<int>(v.size()) == c.size(), "{} on communicator '{}': {} has {} entries, expected {}",
                op, c.name(), what, v.size(), c.size());
  for (auto x : v) ORIGAMI_CHECK(x >= 0, "{} on communicator '{}': {} has a negative entry {}", op, c.name(), what, x);
}

}  // namespace

Communicator Communicator::world(std::shared_ptr<Transport> transport, MemoryTracker& tracker, std::string name) {
  ORIGAMI_CHECK(transport != nullptr, "Communicator::world needs a transport");
  auto core = std::make_shared<detail::CommCore>();
  core->name = std::move(name);
  core->rank = transport->world_rank();
  core->size = transport->world_size();
  core->world_rank = core->rank;
  core->timeout_s = default_timeout_s();
  core->log = std::make_shared<OpLog>();
  core->family = std::make_shared<detail::CommFamily>();
  core->family->cores.push_back(core);
  std::vector<int> ranks(static_cast<std::size_t>(core->size));
  std::iota(ranks.begin(), ranks.end(), 0);
  core->world_ranks = ranks;
  return Communicator(std::make_shared<CommImpl>(core, std::move(transport), tracker, 1, std::move(ranks)));
}

CommImpl& Communicator::impl() const {
  ORIGAMI_CHECK(impl_ != nullptr, "use of an empty Communicator");
  return *impl_;
}

int Communicator::rank() const { return impl().core->rank; }
int Communicator::size() const { return impl().core->size; }
const std::string& Communicator::name() const { return impl().core->name; }
int Communicator::world_rank_of(int r) const {
  check_rank(*this, "world_rank_of", "rank", r);
  return impl().world_ranks[static_cast<std::size_t>(r)];
}
MemoryTracker& Communicator::tracker() const { return *impl().tracker; }
Transport& Communicator::transport() const { return *impl().transport; }
double Communicator::timeout() const { return impl().core->timeout_s; }
void Communicator::set_timeout(double seconds) {
  ORIGAMI_CHECK(seconds > 0 && seconds <= kMaxTimeoutS, "timeout must be positive and at most {:g} s, got {} s",
                kMaxTimeoutS, seconds);
  impl().core->timeout_s = seconds;
}

// --- point-to-point

Handle Communicator::isend(ConstBuffer buf, int dst, int tag) {
  check_rank(*this, "send", "destination", dst);
  check_buffer(*this, "send", "buffer", buf.data, buf.count);
  ORIGAMI_CHECK(tag >= 0 && tag < detail::kCollectiveTagBase, "send: tag {} outside [0, 2^30)", tag);
  auto& m = impl();
  return m.post(true, "send", buf.data, buf.bytes(), dst, tag, m.p2p_seq++, true, buf.dtype == DType::F32);
}

Handle Communicator::irecv(Buffer buf, int src, int tag) {
  check_rank(*this, "recv", "source", src);
  check_buffer(*this, "recv", "buffer", buf.data, buf.count);
  ORIGAMI_CHECK(tag >= 0 && tag < detail::kCollectiveTagBase, "recv: tag {} outside [0, 2^30)", tag);
  auto& m = impl();
  return m.post(false, "recv", buf.data, buf.bytes(), src, tag, m.p2p_seq++, true, buf.dtype == DType::F32);
}

// --- collectives

Handle Communicator::ibroadcast(Buffer buf, int root) {
  check_rank(*this, "broadcast", "root", root);
  check_buffer(*this, "broadcast", "buffer", buf.data, buf.count);
  return impl().submit("broadcast", buf.bytes(), [buf, root](CollectiveContext& c) {
    detail::chain_broadcast(c, buf.data, buf.bytes(), root);
  }, buf.dtype == DType::F32);
}

Handle Communicator::ireduce(ConstBuffer in, Buffer out, int root, ReduceOp op) {
  check_rank(*this, "reduce", "root", root);
  check_buffer(*this, "reduce", "input", in.data, in.count);
  const auto red = detail::make_reducer(op, in.dtype);
  if (rank() == root) {
    check_buffer(*this, "reduce", "output", out.data, out.count);
    check_same_dtype(*this, "reduce", in.dtype, out.dtype);
    ORIGAMI_CHECK(out.count == in.count, "reduce on communicator '{}': the root's output has {} elements but the "
                  "input has {}", name(), out.count, in.count);
  }
  return impl().submit("reduce", in.bytes(), [in, out, root, red](CollectiveContext& c) {
    detail::chain_reduce(c, in.data, out.data, in.count, root, red);
  }, in.dtype == DType::F32);
}

Handle Communicator::iall_gather(ConstBuffer in, Buffer out) {
  return iall_gatherv(in, out, std::vector<std::int64_t>(static_cast<std::size_t>(size()), in.count));
}

Handle Communicator::iall_gatherv(ConstBuffer in, Buffer out, std::vector<std::int64_t> counts) {
  check_buffer(*this, "all_gather", "input", in.data, in.count);
  check_buffer(*this, "all_gather", "output", out.data, out.count);
  check_same_dtype(*this, "all_gather", in.dtype, out.dtype);
  check_counts(*this, "all_gather", "counts", counts);
  ORIGAMI_CHECK(in.count == counts[static_cast<std::size_t>(rank())],
                "all_gather on communicator '{}': rank {} passes {} elements but counts[{}] = {}", name(), rank(),
                in.count, rank(), counts[static_cast<std::size_t>(rank())]);
  ORIGAMI_CHECK(out.count == sum(counts), "all_gather on communicator '{}': output has {} elements, expected {} "
                "(the sum of the counts)", name(), out.count, sum(counts));
  auto blocks = to_bytes(std::move(counts), in.dtype);
  const std::int64_t own_off = detail::prefix_offsets(blocks)[static_cast<std::size_t>(rank())];
  ORIGAMI_CHECK(!overlaps(in.data, in.bytes(), out.data, out.bytes()) ||
                    static_cast<const char*>(in.data) == static_cast<const char*>(out.data) + own_off,
                "all_gather on communicator '{}': the input overlaps the output other than as this rank's block",
                name());
  return impl().submit("all_gather", out.bytes(), [in, out, blocks](CollectiveContext& c) {
    detail::ring_all_gather(c, in.data, out.data, blocks);
  }, in.dtype == DType::F32);
}

Handle Communicator::ireduce_scatter(ConstBuffer in, Buffer out, ReduceOp op) {
  return ireduce_scatterv(in, out, balanced_counts(in.count, size()), op);
}

Handle Communicator::ireduce_scatterv(ConstBuffer in, Buffer out, std::vector<std::int64_t> counts, ReduceOp op) {
  check_buffer(*this, "reduce_scatter", "input", in.data, in.count);
  check_buffer(*this, "reduce_scatter", "output", out.data, out.count);
  check_same_dtype(*this, "reduce_scatter", in.dtype, out.dtype);
  check_counts(*this, "reduce_scatter", "counts", counts);
  const auto red = detail::make_reducer(op, in.dtype);
  ORIGAMI_CHECK(in.count == sum(counts), "reduce_scatter on communicator '{}': input has {} elements but the "
                "counts sum to {}", name(), in.count, sum(counts));
  ORIGAMI_CHECK(out.count == counts[static_cast<std::size_t>(rank())],
                "reduce_scatter on communicator '{}': rank {} output has {} elements, expected {}", name(), rank(),
                out.count, counts[static_cast<std::size_t>(rank())]);
  auto blocks = to_bytes(std::move(counts), in.dtype);
  const std::int64_t own_off = detail::prefix_offsets(blocks)[static_cast<std::size_t>(rank())];
  // Unbacked (dry-run) buffers are null on every rank: never "in place", or rank 0 alone
  // (offset 0) would pick the in-place algorithm and the ranks' messages would not match.
  const bool in_place = out.count > 0 && in.data != nullptr && out.data != nullptr &&
                        static_cast<const char*>(in.data) + own_off == out.data;
  ORIGAMI_CHECK(in_place || !overlaps(in.data, in.bytes(), out.data, out.bytes()),
                "reduce_scatter on communicator '{}': the output overlaps the input other than as this rank's "
                "block", name());
  return impl().submit("reduce_scatter", in.bytes(), [in, out, blocks, red, in_place](CollectiveContext& c) {
    if (in_place) {
      // The caller handed its own block of the input as the output: the input is scratch.
      detail::ring_reduce_scatter_inplace(c, const_cast<void*>(in.data), blocks, red);
    } else {
      detail::ring_reduce_scatter(c, in.data, out.data, blocks, red);
    }
  }, in.dtype == DType::F32);
}

Handle Communicator::iall_reduce(ConstBuffer in, Buffer out, ReduceOp op) {
  check_buffer(*this, "all_reduce", "input", in.data, in.count);
  check_buffer(*this, "all_reduce", "output", out.data, out.count);
  check_same_dtype(*this, "all_reduce", in.dtype, out.dtype);
  const auto red = detail::make_reducer(op, in.dtype);
  ORIGAMI_CHECK(in.count == out.count, "all_reduce on communicator '{}': input has {} elements, output {}", name(),
                in.count, out.count);
  ORIGAMI_CHECK(in.data == out.data || !overlaps(in.data, in.bytes(), out.data, out.bytes()),
                "all_reduce on communicator '{}': input and output partially overlap", name());
  return impl().submit("all_reduce", in.bytes(), [in, out, red](CollectiveContext& c) {
    detail::ring_all_reduce(c, in.data, out.data, in.count, red);
  }, in.dtype == DType::F32);
}

Handle Communicator::iall_reduce_maxloc(Buffer values, Buffer indices) {
  check_buffer(*this, "all_reduce_maxloc", "values", values.data, values.count);
  check_buffer(*this, "all_reduce_maxloc", "indices", indices.data, indices.count);
  ORIGAMI_CHECK(values.dtype == DType::F32 || values.dtype == DType::F64,
                "all_reduce_maxloc on communicator '{}': values must be F32 or F64, got {}", name(),
                dtype_name(values.dtype));
  ORIGAMI_CHECK(indices.dtype == DType::I64, "all_reduce_maxloc on communicator '{}': indices must be I64, got {}",
                name(), dtype_name(indices.dtype));
  ORIGAMI_CHECK(values.count == indices.count, "all_reduce_maxloc on communicator '{}': {} values but {} indices",
                name(), values.count, indices.count);
  const std::int64_t n = values.count;
  return impl().submit("all_reduce_maxloc", n * std::int64_t{sizeof(ValueIndex)}, [values, indices, n](CollectiveContext& c) {
    Tensor packed = c.staging(n * std::int64_t{sizeof(ValueIndex)});
    auto* p = static_cast<ValueIndex*>(packed.raw());
    auto* idx = static_cast<std::int64_t*>(indices.data);
    for (std::int64_t i = 0; i < n; ++i) {
      p[i].value = values.dtype == DType::F32 ? static_cast<const float*>(values.data)[i]
                                              : static_cast<const double*>(values.data)[i];
      p[i].index = idx[i];
    }
    detail::ring_all_reduce(c, p, p, n, detail::maxloc_reducer());
    for (std::int64_t i = 0; i < n; ++i) {
      if (values.dtype == DType::F32) {
        static_cast<float*>(values.data)[i] = static_cast<float>(p[i].value);
      } else {
        static_cast<double*>(values.data)[i] = p[i].value;
      }
      idx[i] = p[i].index;
    }
  });
}

Handle Communicator::iall_to_all(ConstBuffer in, std::vector<std::int64_t> send_counts, Buffer out,
                                 std::vector<std::int64_t> recv_counts) {
  check_buffer(*this, "all_to_all", "input", in.data, in.count);
  check_buffer(*this, "all_to_all", "output", out.data, out.count);
  check_same_dtype(*this, "all_to_all", in.dtype, out.dtype);
  check_counts(*this, "all_to_all", "send_counts", send_counts);
  check_counts(*this, "all_to_all", "recv_counts", recv_counts);
  ORIGAMI_CHECK(in.count == sum(send_counts), "all_to_all on communicator '{}': input has {} elements but "
                "send_counts sum to {}", name(), in.count, sum(send_counts));
  ORIGAMI_CHECK(out.count == sum(recv_counts), "all_to_all on communicator '{}': output has {} elements but "
                "recv_counts sum to {}", name(), out.count, sum(recv_counts));
  const auto r = static_cast<std::size_t>(rank());
  ORIGAMI_CHECK(send_counts[r] == recv_counts[r], "all_to_all on communicator '{}': rank {} sends itself {} "
                "elements but expects {}", name(), rank(), send_counts[r], recv_counts[r]);
  ORIGAMI_CHECK(!overlaps(in.data, in.bytes(), out.data, out.bytes()),
                "all_to_all on communicator '{}': input and output overlap", name());
  auto sb = to_bytes(std::move(send_counts), in.dtype);
  auto rb = to_bytes(std::move(recv_counts), in.dtype);
  return impl().submit("all_to_all", in.bytes(), [in, out, sb, rb](CollectiveContext& c) {
    detail::pairwise_all_to_all(c, in.data, sb, out.data, rb);
  }, in.dtype == DType::F32);
}

Handle Communicator::ibarrier() {
  return impl().submit("barrier", 0, [](CollectiveContext& c) { detail::dissemination_barrier(c); });
}

// --- groups

Communicator Communicator::split(int color, int key, std::string new_name) {
  ORIGAMI_CHECK(color >= 0, "split on communicator '{}': color must be >= 0, got {}", name(), color);
  auto& m = impl();
  const int n = size();
  std::vector<std::int64_t> mine = {color, key};
  std::vector<std::int64_t> all(static_cast<std::size_t>(2 * n));
  std::vector<std::int64_t> blocks(static_cast<std::size_t>(n), 16);
  m.submit("split", 16 * n, [&](CollectiveContext& c) { detail::ring_all_gather(c, mine.data(), all.data(), blocks); })
      .wait();
  std::vector<int> members;
  for (int i = 0; i < n; ++i) {
    if (all[static_cast<std::size_t>(2 * i)] == color) members.push_back(i);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[static_cast<std::size_t>(2 * a + 1)] < all[static_cast<std::size_t>(2 * b + 1)];
  });
  auto core = std::make_shared<detail::CommCore>();
  core->name = new_name.empty() ? fmt::format("{}/{}", m.core->name, color) : std::move(new_name);
  core->size = static_cast<int>(members.size());
  core->rank = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
  core->world_rank = m.core->world_rank;
  core->timeout_s = m.core->timeout_s.load();
  core->log = m.core->log;
  core->family = m.core->family;
  if (core->family) {
    std::lock_guard lock(core->family->m);
    core->family->cores.push_back(core);
  }
  std::vector<int> world;
  for (int g : members) world.push_back(m.world_ranks[static_cast<std::size_t>(g)]);
  core->world_ranks = world;
  const std::uint64_t child = mix(m.id ^ mix(static_cast<std::uint64_t>(m.splits) * 0x100000001ULL +
                                             static_cast<std::uint64_t>(color)));
  m.splits += 1;
  m.transport->create_group(m.id, child, color, key);
  return Communicator(std::make_shared<CommImpl>(core, m.transport, *m.tracker, child, std::move(world)));
}

// --- accounting

CommStats Communicator::stats() const { return impl().core->stats.snapshot(rank(), name()); }

std::vector<CommStats> Communicator::family_stats() const {
  std::vector<CommStats> out;
  const auto& family = impl().core->family;
  if (!family) return {stats()};
  std::lock_guard lock(family->m);
  for (const auto& weak : family->cores)
    if (auto c = weak.lock()) out.push_back(c->stats.snapshot(c->rank, c->name));
  return out;
}
void Communicator::reset_stats() { impl().core->stats.reset(); }

std::vector<CommStats> Communicator::gather_stats() {
  auto& m = impl();
  std::string mine = stats().to_json();
  if (mine.size() % 2) mine.push_back(' ');  // moved as 2-byte elements; JSON ignores the pad
  const int n = size();
  std::vector<std::int64_t> len = {static_cast<std::int64_t>(mine.size())};
  std::vector<std::int64_t> lens(static_cast<std::size_t>(n));
  m.submit("stats", 8 * n, [&](CollectiveContext& c) {
     detail::ring_all_gather(c, len.data(), lens.data(), std::vector<std::int64_t>(static_cast<std::size_t>(n), 8));
   }).wait();
  std::string all(static_cast<std::size_t>(sum(lens)), ' ');
  m.submit("stats", sum(lens), [&](CollectiveContext& c) { detail::ring_all_gather(c, mine.data(), all.data(), lens); })
      .wait();
  std::vector<CommStats> out;
  if (rank() != 0) return out;
  std::int64_t off = 0;
  for (auto l : lens) {
    out.push_back(CommStats::from_json(all.substr(static_cast<std::size_t>(off), static_cast<std::size_t>(l))));
    off += l;
  }
  return out;
}

}  // namespace origami::comm
