// Flash attention against a naive float64 reference (the full score matrix, in double):
// forward out and lse, backward dq/dk/dv, per tensor ||a - b|| / ||b|| <= 1e-5, on causal,
// zigzag, contiguous-chunk, permuted and all-future positions, GQA, odd lengths and head sizes,
// 1 and 2 threads, on every SIMD target; key splits merged by log-sum-exp; the += convention;
// packed documents (per-row document ids) and the tile skipping they allow.
#include "origami/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "origami/core/error.h"
#include "../sanitizers.h"
#include "origami/kernels/threads.h"
#include "simd_targets.h"

namespace origami::kernels {
namespace {

constexpr double kTol = 1e-5;  // per-tensor relative error of fp32 against float64
constexpr double kInf = std::numeric_limits<double>::infinity();

using Positions = std::vector<std::int64_t>;
using DocIds = std::vector<std::int32_t>;  // [B, len]; empty: one document

// ----- the float64 reference ---------------------------------------------------------------

struct RefForward {
  std::vector<double> out, lse;
};
struct Grads {
  std::vector<double> dq, dk, dv;
};

template <class T>
std::vector<double> to_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Straight from the definition: softmax over the visible keys of each (query, head).
RefForward reference_forward(const AttentionShape& s, const std::vector<double>& q,
                             const std::vector<double>& k, const std::vector<double>& v,
                             const Positions& qp, const Positions& kp, double scale,
                             const DocIds& qd = {}, const DocIds& kd = {}) {
  const std::int64_t H = s.heads, Hkv = s.kv_heads, d = s.head_dim, rep = H / Hkv;
  auto hidden = [&](std::int64_t b, std::int64_t i, std::int64_t j) {
    return kp[j] > qp[i] || (!qd.empty() && qd[b * s.q_len + i] != kd[b * s.kv_len + j]);
  };
  RefForward r;
  r.out.assign(static_cast<std::size_t>(s.batch * s.q_len * H * d), 0.0);
  r.lse.assign(static_cast<std::size_t>(s.batch * H * s.q_len), -kInf);
  std::vector<double> sc(static_cast<std::size_t>(s.kv_len));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t i = 0; i < s.q_len; ++i) {
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t g = h / rep;
        const double* qi = &q[static_cast<std::size_t>(((b * s.q_len + i) * H + h) * d)];
        double m = -kInf;
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          if (hidden(b, i, j)) continue;
          const double* kj = &k[static_cast<std::size_t>(((b * s.kv_len + j) * Hkv + g) * d)];
          double dot = 0.0;
          for (std::int64_t c = 0; c < d; ++c) dot += qi[c] * kj[c];
          sc[j] = scale * dot;
          m = std::max(m, sc[j]);
        }
        if (m == -kInf) continue;
        double l = 0.0;
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          if (!hidden(b, i, j)) l += std::exp(sc[j] - m);
        }
        const double lse = m + std::log(l);
        r.lse[static_cast<std::size_t>((b * H + h) * s.q_len + i)] = lse;
        double* o = &r.out[static_cast<std::size_t>(((b * s.q_len + i) * H + h) * d)];
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          if (hidden(b, i, j)) continue;
          const double p = std::exp(sc[j] - lse);
          const double* vj = &v[static_cast<std::size_t>(((b * s.kv_len + j) * Hkv + g) * d)];
          for (std::int64_t c = 0; c < d; ++c) o[c] += p * vj[c];
        }
      }
    }
  }
  return r;
}

// Gradients of sum(dout * out), by the softmax Jacobian written out per (query, head).
Grads reference_backward(const AttentionShape& s, const std::vector<double>& q,
                         const std::vector<double>& k, const std::vector<double>& v,
                         const Positions& qp, const Positions& kp, double scale,
                         const std::vector<double>& dout, const DocIds& qd = {},
                         const DocIds& kd = {}) {
  const std::int64_t H = s.heads, Hkv = s.kv_heads, d = s.head_dim, rep = H / Hkv;
  const RefForward f = reference_forward(s, q, k, v, qp, kp, scale, qd, kd);
  Grads g{std::vector<double>(q.size(), 0.0), std::vector<double>(k.size(), 0.0),
          std::vector<double>(v.size(), 0.0)};
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t i = 0; i < s.q_len; ++i) {
      for (std::int64_t h = 0; h < H; ++h) {
        const double lse = f.lse[static_cast<std::size_t>((b * H + h) * s.q_len + i)];
        if (lse == -kInf) continue;
        const std::int64_t kvh = h / rep;
        const std::size_t qo = static_cast<std::size_t>(((b * s.q_len + i) * H + h) * d);
        double delta = 0.0;  // D = dO . O
        for (std::int64_t c = 0; c < d; ++c) delta += dout[qo + c] * f.out[qo + c];
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          if (kp[j] > qp[i] || (!qd.empty() && qd[b * s.q_len + i] != kd[b * s.kv_len + j]))
            continue;
          const std::size_t ko = static_cast<std::size_t>(((b * s.kv_len + j) * Hkv + kvh) * d);
          double dot = 0.0, dp = 0.0;
          for (std::int64_t c = 0; c < d; ++c) {
            dot += q[qo + c] * k[ko + c];
            dp += dout[qo + c] * v[ko + c];
          }
          const double p = std::exp(scale * dot - lse);
          const double ds = p * (dp - delta);
          for (std::int64_t c = 0; c < d; ++c) {
            g.dq[qo + c] += scale * ds * k[ko + c];
            g.dk[ko + c] += scale * ds * q[qo + c];
            g.dv[ko + c] += p * dout[qo + c];
          }
        }
      }
    }
  }
  return g;
}

// ----- problems ---------------------------------------------------------------------------

struct Problem {
  std::string name;
  AttentionShape s;
  Positions qp, kp;
  DocIds qd, kd;  // empty: one document per row
  std::vector<float> q, k, v, dout;
  float scale = 1.0f;
};

std::vector<float> random_vector(std::mt19937& gen, std::int64_t n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& e : x) e = dist(gen);
  return x;
}

Problem make_problem(std::string name, std::int64_t B, std::int64_t H, std::int64_t Hkv,
                     std::int64_t d, Positions qp, Positions kp, unsigned seed = 1) {
  Problem p;
  p.name = std::move(name);
  p.s = AttentionShape{
      B, static_cast<std::int64_t>(qp.size()), static_cast<std::int64_t>(kp.size()), H, Hkv, d};
  p.qp = std::move(qp);
  p.kp = std::move(kp);
  std::mt19937 gen(seed);
  p.q = random_vector(gen, B * p.s.q_len * H * d);
  p.k = random_vector(gen, B * p.s.kv_len * Hkv * d);
  p.v = random_vector(gen, B * p.s.kv_len * Hkv * d);
  p.dout = random_vector(gen, B * p.s.q_len * H * d);
  // A sharper softmax than 1/sqrt(d) so that the probabilities are far from uniform.
  p.scale = 2.0f / std::sqrt(static_cast<float>(d));
  return p;
}

Positions range(std::int64_t begin, std::int64_t end) {
  Positions p(static_cast<std::size_t>(end - begin));
  std::iota(p.begin(), p.end(), begin);
  return p;
}
Positions concat(Positions a, const Positions& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
// Zigzag over D ranks of a sequence of 2*D*chunk positions: rank r holds chunks r and
// 2D-1-r. Returns rank r's positions.
Positions zigzag_rank(std::int64_t D, std::int64_t chunk, std::int64_t r) {
  return concat(range(r * chunk, (r + 1) * chunk),
                range((2 * D - 1 - r) * chunk, (2 * D - r) * chunk));
}
// All keys of the zigzag layout, gathered in rank order.
Positions zigzag_all(std::int64_t D, std::int64_t chunk) {
  Positions p;
  for (std::int64_t r = 0; r < D; ++r) p = concat(p, zigzag_rank(D, chunk, r));
  return p;
}

// ----- comparisons ------------------------------------------------------------------------

// ||a - b|| / ||b||. When b is exactly zero (dq with a single visible key: the softmax of one
// score has no gradient, and the reference cancels exactly) fp32 leaves rounding noise of the
// O(1) inputs' size, so the error is then the RMS of a, an absolute error per element.
double rel_error(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = static_cast<double>(a[i]) - b[i];
    num += e * e;
    den += b[i] * b[i];
  }
  if (den == 0.0) return a.empty() ? 0.0 : std::sqrt(num / static_cast<double>(a.size()));
  return std::sqrt(num / den);
}

// lse: the -inf entries must match exactly, the finite ones within kTol.
void expect_lse_near(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  std::vector<float> g;
  std::vector<double> w;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::isinf(got[i]) && got[i] < 0, want[i] == -kInf) << "lse entry " << i;
    if (want[i] != -kInf) {
      g.push_back(got[i]);
      w.push_back(want[i]);
    }
  }
  EXPECT_LE(rel_error(g, w), kTol);
}

void expect_finite(const std::vector<float>& x, const char* what) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_TRUE(std::isfinite(x[i])) << what << "[" << i << "] = " << x[i];
  }
}

struct KernelResult {
  std::vector<float> out, lse, dq, dk, dv;
};

// Forward then backward through the kernels, gradients accumulated into zeros.
KernelResult run_kernels(const Problem& p) {
  const AttentionShape& s = p.s;
  KernelResult r;
  r.out.assign(p.q.size(), 123.0f);  // overwritten
  r.lse.assign(static_cast<std::size_t>(s.batch * s.heads * s.q_len), 123.0f);
  r.dq.assign(p.q.size(), 0.0f);
  r.dk.assign(p.k.size(), 0.0f);
  r.dv.assign(p.v.size(), 0.0f);
  if (p.qd.empty()) {  // the calls without documents
    attention_forward(s, p.q.data(), p.k.data(), p.v.data(), p.qp.data(), p.kp.data(), p.scale,
                      r.out.data(), r.lse.data());
    attention_backward(s, p.q.data(), p.k.data(), p.v.data(), p.qp.data(), p.kp.data(), p.scale,
                       r.out.data(), r.lse.data(), p.dout.data(), r.dq.data(), r.dk.data(),
                       r.dv.data());
    return r;
  }
  const AttentionDocs docs{p.qd.data(), p.kd.data()};
  attention_forward(s, p.q.data(), p.k.data(), p.v.data(), p.qp.data(), p.kp.data(), docs,
                    p.scale, r.out.data(), r.lse.data());
  attention_backward(s, p.q.data(), p.k.data(), p.v.data(), p.qp.data(), p.kp.data(), docs,
                     p.scale, r.out.data(), r.lse.data(), p.dout.data(), r.dq.data(), r.dk.data(),
                     r.dv.data());
  return r;
}

void expect_matches_reference(const Problem& p) {
  SCOPED_TRACE(fmt::format("{}: B={} q_len={} kv_len={} H={} Hkv={} d={}", p.name, p.s.batch,
                           p.s.q_len, p.s.kv_len, p.s.heads, p.s.kv_heads, p.s.head_dim));
  const KernelResult r = run_kernels(p);
  const auto q = to_double(p.q), k = to_double(p.k), v = to_double(p.v);
  const RefForward f = reference_forward(p.s, q, k, v, p.qp, p.kp, p.scale, p.qd, p.kd);
  const Grads g =
      reference_backward(p.s, q, k, v, p.qp, p.kp, p.scale, to_double(p.dout), p.qd, p.kd);
  for (const auto* x : {&r.out, &r.dq, &r.dk, &r.dv}) expect_finite(*x, "result");
  EXPECT_LE(rel_error(r.out, f.out), kTol);
  expect_lse_near(r.lse, f.lse);
  EXPECT_LE(rel_error(r.dq, g.dq), kTol);
  EXPECT_LE(rel_error(r.dk, g.dk), kTol);
  EXPECT_LE(rel_error(r.dv, g.dv), kTol);
}

// Restores the calling thread's kernel thread count when a test ends.
// Every kernel test below runs on every SIMD target of the machine.
class Attention : public testing::OnEverySimdTarget {};

struct ThreadCountGuard {
  int saved = thread_count();
  ~ThreadCountGuard() { set_thread_count(saved); }
};

// ----- tests ------------------------------------------------------------------------------

// The reference's gradients equal central differences of sum(dout * out) in double.
TEST(AttentionReference, GradientsMatchFiniteDifferences) {
  const AttentionShape s{1, 3, 4, 2, 1, 3};
  const Positions qp{1, 2, 3}, kp{0, 1, 2, 3};
  std::mt19937 gen(7);
  auto rnd = [&](std::int64_t n) { return to_double(random_vector(gen, n)); };
  std::vector<double> q = rnd(3 * 2 * 3), k = rnd(4 * 3), v = rnd(4 * 3), dout = rnd(3 * 2 * 3);
  const double scale = 0.7;
  const Grads g = reference_backward(s, q, k, v, qp, kp, scale, dout);
  auto loss = [&] {
    const RefForward f = reference_forward(s, q, k, v, qp, kp, scale);
    return std::inner_product(f.out.begin(), f.out.end(), dout.begin(), 0.0);
  };
  const double h = 1e-6;
  auto check = [&](std::vector<double>& x, const std::vector<double>& grad, const char* what) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double x0 = x[i];
      x[i] = x0 + h;
      const double up = loss();
      x[i] = x0 - h;
      const double down = loss();
      x[i] = x0;
      EXPECT_NEAR((up - down) / (2 * h), grad[i], 1e-7) << what << "[" << i << "]";
    }
  };
  check(q, g.dq, "dq");
  check(k, g.dk, "dk");
  check(v, g.dv, "dv");
  // The gradient is not trivially zero.
  EXPECT_GT(std::abs(g.dq[0]) + std::abs(g.dk[0]) + std::abs(g.dv[0]), 1e-3);
}

TEST_P(Attention, CausalOddLengths) {
  for (std::int64_t n : {1, 3, 17, 67, 130}) {
    expect_matches_reference(make_problem("causal", 1, 2, 1, 16, range(0, n), range(0, n), 11));
  }
}

TEST_P(Attention, QueryAndKeyLengthsDiffer) {
  // The last 17 positions of a 130-long sequence against all its keys, and the reverse.
  expect_matches_reference(
      make_problem("late queries", 1, 2, 2, 16, range(113, 130), range(0, 130), 2));
  expect_matches_reference(
      make_problem("many queries", 1, 2, 2, 16, range(0, 130), range(0, 17), 3));
  // Keys of another rank's earlier chunk only.
  expect_matches_reference(make_problem("past chunk", 2, 3, 1, 12, range(40, 71), range(0, 29), 4));
}

TEST_P(Attention, ZigzagChunks) {
  for (std::int64_t D : {2, 3}) {
    for (std::int64_t chunk : {5, 37}) {  // 37: chunks straddle tiles of keys and queries
      for (std::int64_t r = 0; r < D; ++r) {
        expect_matches_reference(make_problem(fmt::format("zigzag D={} rank {}", D, r), 1, 4, 2, 16,
                                              zigzag_rank(D, chunk, r), zigzag_all(D, chunk),
                                              static_cast<unsigned>(10 * D + r)));
      }
    }
  }
}

TEST_P(Attention, ContiguousChunks) {
  const std::int64_t D = 3, chunk = 45;
  for (std::int64_t r = 0; r < D; ++r) {
    expect_matches_reference(make_problem(fmt::format("contiguous rank {}", r), 1, 2, 1, 16,
                                          range(r * chunk, (r + 1) * chunk), range(0, D * chunk),
                                          static_cast<unsigned>(20 + r)));
  }
}

TEST_P(Attention, PermutedPositions) {
  Positions qp = range(0, 70), kp = range(0, 150);
  std::mt19937 gen(5);
  for (auto& x : kp) x = static_cast<std::int64_t>(gen() % 100);  // repeats, unsorted
  std::shuffle(qp.begin(), qp.end(), gen);
  expect_matches_reference(make_problem("permuted", 2, 2, 1, 16, qp, kp, 6));
}

TEST_P(Attention, KeysAllInTheFutureGiveZeroRowsAndGrads) {
  const Problem p = make_problem("future", 2, 4, 2, 16, range(0, 20), range(20, 45), 8);
  const KernelResult r = run_kernels(p);
  for (float x : r.out) ASSERT_EQ(x, 0.0f);
  for (float x : r.lse) ASSERT_TRUE(std::isinf(x) && x < 0);
  for (const auto* g : {&r.dq, &r.dk, &r.dv}) {
    for (float x : *g) ASSERT_EQ(x, 0.0f);
  }
  // Mixed: the early queries see nothing, the later ones some keys.
  expect_matches_reference(
      make_problem("partly future", 1, 2, 1, 16, range(0, 40), range(25, 90), 9));
}

TEST_P(Attention, GroupedQueryHeadsAndBatch) {
  struct Heads {
    std::int64_t H, Hkv;
  };
  for (const Heads h : {Heads{6, 3}, Heads{8, 2}, Heads{4, 4}, Heads{5, 1}}) {
    expect_matches_reference(make_problem(fmt::format("gqa {}/{}", h.H, h.Hkv), 3, h.H, h.Hkv, 16,
                                          range(0, 33), range(0, 33),
                                          static_cast<unsigned>(h.H * 10 + h.Hkv)));
  }
}

TEST_P(Attention, HeadSizes) {
  for (std::int64_t d : {1, 8, 12, 16, 33, 64, 80}) {
    expect_matches_reference(make_problem(fmt::format("d={}", d), 1, 2, 1, d, range(0, 45),
                                          range(0, 45), static_cast<unsigned>(d)));
  }
}

TEST_P(Attention, SeveralTilesEachWay) {
  // 300 queries x 2 heads and 600 keys: several query blocks and key tiles, partial last
  // tiles, diagonal, skipped and fully visible tile pairs.
  expect_matches_reference(make_problem("tiles", 1, 2, 1, 32, range(300, 600), range(0, 600), 31));
  // Zigzag with chunks longer than a tile: rank 0's late chunk sees every key tile, its early
  // chunk only the first.
  for (std::int64_t r = 0; r < 2; ++r) {
    expect_matches_reference(make_problem("zigzag tiles", 1, 2, 2, 16, zigzag_rank(2, 150, r),
                                          zigzag_all(2, 150), static_cast<unsigned>(32 + r)));
  }
}

// Diagonal tiles, where each vector of queries (forward) and each row group (backward) only
// computes the keys it can see: odd lengths, query blocks ending mid-tile, grouped heads whose
// block rows split a position across vectors, queries and keys offset from each other and of
// different lengths; the results bitwise the same on 1 and 2 threads.
TEST_P(Attention, DiagonalTilesTrimmedPerRowGroup) {
  ThreadCountGuard guard;
  struct Case {
    const char* name;
    std::int64_t H, Hkv, d;
    Positions qp, kp;
  };
  const std::vector<Case> cases = {
      {"gqa 3/1", 3, 1, 12, range(0, 141), range(0, 141)},
      {"keys offset", 2, 1, 16, range(0, 300), range(-13, 287)},
#ifndef ORIGAMI_TESTS_SANITIZED  // about 20x slower there: the two cases above
      {"causal 290", 1, 1, 20, range(0, 290), range(0, 290)},
      {"late queries", 2, 2, 16, range(77, 333), range(0, 333)},
#endif
  };
  unsigned seed = 90;
  for (const Case& c : cases) {
    const Problem p = make_problem(c.name, 1, c.H, c.Hkv, c.d, c.qp, c.kp, seed++);
    set_thread_count(1);
    expect_matches_reference(p);
    const KernelResult one = run_kernels(p);
    set_thread_count(2);
    const KernelResult two = run_kernels(p);
    SCOPED_TRACE(c.name);
    EXPECT_EQ(one.out, two.out);
    EXPECT_EQ(one.lse, two.lse);
    EXPECT_EQ(one.dq, two.dq);
    EXPECT_EQ(one.dk, two.dk);
    EXPECT_EQ(one.dv, two.dv);
  }
}

// Random shapes and positions (sorted, shuffled, repeated, negative), 1 or 2 threads: the
// combinations the fixed cases above do not reach.
TEST_P(Attention, RandomShapesAndPositions) {
  ThreadCountGuard guard;
  std::mt19937 gen(2024);
  auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
  };
  for (int trial = 0; trial < 12; ++trial) {
    const std::int64_t Hkv = uniform(1, 3), H = Hkv * uniform(1, 3), d = uniform(1, 40);
    const std::int64_t q_len = uniform(1, 90), kv_len = uniform(1, trial % 3 == 0 ? 600 : 120);
    Positions qp(static_cast<std::size_t>(q_len)), kp(static_cast<std::size_t>(kv_len));
    const std::int64_t span = uniform(1, 700);
    for (auto& x : qp) x = uniform(-50, span);
    for (auto& x : kp) x = uniform(-50, span);
    if (trial % 2 == 0) {  // sorted, as real layouts are
      std::sort(qp.begin(), qp.end());
      std::sort(kp.begin(), kp.end());
    }
    set_thread_count(static_cast<int>(uniform(1, 2)));
    expect_matches_reference(
        make_problem(fmt::format("random {} threads {}", trial, thread_count()), uniform(1, 2), H,
                     Hkv, d, qp, kp, static_cast<unsigned>(100 + trial)));
  }
}

TEST_P(Attention, ThreadCountDoesNotChangeResults) {
  ThreadCountGuard guard;
  // kv-head units 1 and 3 use the split backward on 2 threads, 2 and 4 the fused one.
  struct Case {
    std::int64_t B, H, Hkv;
  };
  for (const Case c : {Case{1, 2, 1}, Case{1, 6, 3}, Case{2, 2, 1}, Case{1, 8, 4}}) {
    // The split case gets 600 keys: three key tiles, so that its units of two key tiles end
    // with a partial one. The others are kept small for the sanitizer build.
    const std::int64_t chunk = c.B * c.Hkv == 1 ? 150 : 40;
    const Problem p = make_problem("threads", c.B, c.H, c.Hkv, 16, zigzag_rank(2, chunk, 1),
                                   zigzag_all(2, chunk), 77);
    set_thread_count(1);
    const KernelResult one = run_kernels(p);
    set_thread_count(2);
    const KernelResult two = run_kernels(p);
    SCOPED_TRACE(fmt::format("B={} H={} Hkv={}", c.B, c.H, c.Hkv));
    // Every tile product is added in the same order whatever the threads: bitwise equal.
    EXPECT_EQ(one.out, two.out);
    EXPECT_EQ(one.lse, two.lse);
    EXPECT_EQ(one.dq, two.dq);
    EXPECT_EQ(one.dk, two.dk);
    EXPECT_EQ(one.dv, two.dv);
    expect_matches_reference(p);  // on 2 threads
  }
}

// Keys split into two disjoint sets (by rows, as a ring or an attend-local-first schedule
// does): two calls merged by log-sum-exp equal one call; the backward of each subset with the
// merged out/lse, summed, equals the full backward.
TEST_P(Attention, SplitKeysMergeAndBackwardPerSubset) {
  // Zigzag rank 0 of D=2: queries 0..9 and 30..39; keys split into rank 0's and rank 1's rows.
  // Queries 0..9 see only rank-0 keys (the other side is -inf); position 0 queries see key 0.
  const std::int64_t D = 2, chunk = 10;
  const Positions qp = zigzag_rank(D, chunk, 0), kp = zigzag_all(D, chunk);
  Problem p = make_problem("split", 2, 4, 2, 16, qp, kp, 41);
  const AttentionShape& s = p.s;
  const std::int64_t split = 2 * chunk;  // key rows [0, split) and [split, kv_len)
  const std::int64_t Hkv = s.kv_heads, d = s.head_dim;

  // Sub-problem tensors for key rows [j0, j1).
  auto key_rows = [&](const std::vector<float>& x, std::int64_t j0, std::int64_t j1) {
    std::vector<float> r;
    for (std::int64_t b = 0; b < s.batch; ++b) {
      const auto first = x.begin() + (b * s.kv_len + j0) * Hkv * d;
      r.insert(r.end(), first, first + (j1 - j0) * Hkv * d);
    }
    return r;
  };
  struct Part {
    AttentionShape s;
    Positions kp;
    std::vector<float> k, v, out, lse, dk, dv;
  };
  std::vector<Part> parts;
  for (auto [j0, j1] : {std::pair<std::int64_t, std::int64_t>{0, split}, {split, s.kv_len}}) {
    Part part;
    part.s = s;
    part.s.kv_len = j1 - j0;
    part.kp = Positions(kp.begin() + j0, kp.begin() + j1);
    part.k = key_rows(p.k, j0, j1);
    part.v = key_rows(p.v, j0, j1);
    part.out.resize(p.q.size());
    part.lse.resize(static_cast<std::size_t>(s.batch * s.heads * s.q_len));
    attention_forward(part.s, p.q.data(), part.k.data(), part.v.data(), qp.data(), part.kp.data(),
                      p.scale, part.out.data(), part.lse.data());
    parts.push_back(std::move(part));
  }
  // Some rows must really exercise the -inf side of the merge.
  ASSERT_TRUE(
      std::any_of(parts[1].lse.begin(), parts[1].lse.end(), [](float x) { return std::isinf(x); }));
  std::vector<float> out = parts[0].out, lse = parts[0].lse;
  attention_merge(s.batch, s.q_len, s.heads, d, out.data(), lse.data(), parts[1].out.data(),
                  parts[1].lse.data());

  const KernelResult whole = run_kernels(p);
  EXPECT_LE(rel_error(out, to_double(whole.out)), 1e-6);
  expect_lse_near(lse, to_double(whole.lse));

  std::vector<float> dq(p.q.size(), 0.0f), dk, dv;
  for (Part& part : parts) {
    part.dk.assign(part.k.size(), 0.0f);
    part.dv.assign(part.v.size(), 0.0f);
    attention_backward(part.s, p.q.data(), part.k.data(), part.v.data(), qp.data(), part.kp.data(),
                       p.scale, out.data(), lse.data(), p.dout.data(), dq.data(), part.dk.data(),
                       part.dv.data());
  }
  // Reassemble dk/dv in the full key order (per sequence: part 0 rows, then part 1 rows).
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (const Part& part : parts) {
      const std::int64_t n = part.s.kv_len * Hkv * d;
      dk.insert(dk.end(), part.dk.begin() + b * n, part.dk.begin() + (b + 1) * n);
      dv.insert(dv.end(), part.dv.begin() + b * n, part.dv.begin() + (b + 1) * n);
    }
  }
  const Grads g = reference_backward(s, to_double(p.q), to_double(p.k), to_double(p.v), qp, kp,
                                     p.scale, to_double(p.dout));
  EXPECT_LE(rel_error(dq, g.dq), kTol);
  EXPECT_LE(rel_error(dk, g.dk), kTol);
  EXPECT_LE(rel_error(dv, g.dv), kTol);
}

TEST_P(Attention, BackwardAccumulatesIntoExistingGradients) {
  const Problem p = make_problem("accumulate", 1, 4, 2, 16, range(0, 50), range(0, 50), 51);
  const KernelResult fresh = run_kernels(p);
  std::mt19937 gen(52);
  const std::vector<float> dq0 = random_vector(gen, static_cast<std::int64_t>(p.q.size()));
  const std::vector<float> dk0 = random_vector(gen, static_cast<std::int64_t>(p.k.size()));
  const std::vector<float> dv0 = random_vector(gen, static_cast<std::int64_t>(p.v.size()));
  std::vector<float> dq = dq0, dk = dk0, dv = dv0;
  attention_backward(p.s, p.q.data(), p.k.data(), p.v.data(), p.qp.data(), p.kp.data(), p.scale,
                     fresh.out.data(), fresh.lse.data(), p.dout.data(), dq.data(), dk.data(),
                     dv.data());
  auto plus = [](const std::vector<float>& a, const std::vector<float>& b) {
    std::vector<double> r(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) r[i] = double{a[i]} + double{b[i]};
    return r;
  };
  EXPECT_LE(rel_error(dq, plus(dq0, fresh.dq)), 1e-6);
  EXPECT_LE(rel_error(dk, plus(dk0, fresh.dk)), 1e-6);
  EXPECT_LE(rel_error(dv, plus(dv0, fresh.dv)), 1e-6);
  EXPECT_NE(dq, fresh.dq);  // the previous contents really were kept
}

TEST(AttentionMerge, HandlesEmptySidesExactly) {
  // batch 1, q_len 3, heads 1, d 2; rows: (finite, -inf), (-inf, finite), (-inf, -inf).
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> out_a{1, 2, 9, 9, 9, 9}, lse_a{0.5f, ninf, ninf};
  const std::vector<float> out_b{7, 7, 3, 4, 7, 7}, lse_b{ninf, 1.5f, ninf};
  attention_merge(1, 3, 1, 2, out_a.data(), lse_a.data(), out_b.data(), lse_b.data());
  EXPECT_EQ(out_a, (std::vector<float>{1, 2, 3, 4, 0, 0}));
  EXPECT_EQ(lse_a[0], 0.5f);
  EXPECT_EQ(lse_a[1], 1.5f);
  EXPECT_TRUE(std::isinf(lse_a[2]) && lse_a[2] < 0);
  // Two finite sides: weights e^la, e^lb.
  std::vector<float> oa{1.0f}, la{std::log(1.0f)};
  const std::vector<float> ob{4.0f}, lb{std::log(3.0f)};
  attention_merge(1, 1, 1, 1, oa.data(), la.data(), ob.data(), lb.data());
  EXPECT_NEAR(oa[0], (1.0 * 1 + 3.0 * 4) / 4.0, 1e-6);
  EXPECT_NEAR(la[0], std::log(4.0), 1e-6);
}

TEST(AttentionChecks, ZeroSizes) {
  const float ninf = -std::numeric_limits<float>::infinity();
  // No keys: zero rows and -inf lse; backward adds nothing.
  Problem p = make_problem("no keys", 2, 2, 1, 8, range(0, 3), {}, 61);
  const KernelResult r = run_kernels(p);
  for (float x : r.out) EXPECT_EQ(x, 0.0f);
  for (float x : r.lse) EXPECT_EQ(x, ninf);
  for (float x : r.dq) EXPECT_EQ(x, 0.0f);
  // No queries, or no sequences: nothing to do, nothing read.
  Problem none = make_problem("no queries", 1, 2, 1, 8, {}, range(0, 5), 62);
  EXPECT_NO_THROW(run_kernels(none));
  AttentionShape empty{0, 4, 4, 2, 1, 8};
  const Positions pos = range(0, 4);
  EXPECT_NO_THROW(attention_forward(empty, nullptr, nullptr, nullptr, pos.data(), pos.data(), 1.0f,
                                    nullptr, nullptr));
  EXPECT_EQ(attention_forward_flops(empty, pos.data(), pos.data()), 0.0);
}

TEST(AttentionChecks, RejectsBadInput) {
  const Positions pos = range(0, 4);
  std::vector<float> x(4 * 6 * 8), lse(6 * 4);
  auto fwd = [&](AttentionShape s, float scale = 1.0f) {
    attention_forward(s, x.data(), x.data(), x.data(), pos.data(), pos.data(), scale, x.data(),
                      lse.data());
  };
  EXPECT_THROW(fwd(AttentionShape{1, 4, 4, 6, 4, 8}), Error);   // 6 heads over 4 kv heads
  EXPECT_THROW(fwd(AttentionShape{1, -1, 4, 2, 1, 8}), Error);  // negative length
  EXPECT_THROW(fwd(AttentionShape{1, 4, 4, 2, 1, 0}), Error);   // empty head
  EXPECT_THROW(fwd(AttentionShape{1, 4, 4, 2, 0, 8}), Error);   // no kv head
  EXPECT_THROW(fwd(AttentionShape{1, 4, 4, 2, 1, 8}, std::nanf("")), Error);
  EXPECT_THROW(attention_forward(AttentionShape{1, 4, 4, 2, 1, 8}, nullptr, x.data(), x.data(),
                                 pos.data(), pos.data(), 1.0f, x.data(), lse.data()),
               Error);
  EXPECT_THROW(attention_merge(1, 4, 0, 8, x.data(), lse.data(), x.data(), lse.data()), Error);
  try {
    fwd(AttentionShape{1, 4, 4, 6, 4, 8});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of kv heads"), std::string::npos) << e.what();
  }
}

TEST(AttentionChecks, ForwardFlopsCountVisiblePairs) {
  const std::int64_t S = 100;
  const Positions all = range(0, S);
  const AttentionShape s{2, S, S, 4, 2, 64};
  EXPECT_EQ(attention_forward_flops(s, all.data(), all.data()),
            4.0 * 64 * 4 * 2 * (S * (S + 1) / 2));
  // Zigzag over D = 2: every rank does the same work, and the ranks add up to the whole.
  const std::int64_t D = 2, chunk = S / (2 * D);
  const Positions keys = zigzag_all(D, chunk);
  AttentionShape rank_shape = s;
  rank_shape.q_len = 2 * chunk;
  double total = 0.0;
  for (std::int64_t r = 0; r < D; ++r) {
    const Positions qp = zigzag_rank(D, chunk, r);
    const double f = attention_forward_flops(rank_shape, qp.data(), keys.data());
    total += f;
    EXPECT_EQ(f, 4.0 * 64 * 4 * 2 * (S * (S + 1) / 2) / D);
  }
  EXPECT_EQ(total, attention_forward_flops(s, all.data(), all.data()));
  const Positions future = range(S, 2 * S);
  EXPECT_EQ(attention_forward_flops(s, all.data(), future.data()), 0.0);
}

// ----- packed documents ---------------------------------------------------------------------

// The document ids of one packed row of documents of these lengths (0, 0, 1, 1, 1, 2, ...).
DocIds packed_row(const std::vector<std::int64_t>& lengths) {
  DocIds d;
  for (std::size_t i = 0; i < lengths.size(); ++i)
    d.insert(d.end(), static_cast<std::size_t>(lengths[i]), static_cast<std::int32_t>(i));
  return d;
}
// Self-attention over rows of these documents (one length list per row, each summing to S).
Problem packed_problem(std::string name, std::int64_t H, std::int64_t Hkv, std::int64_t d,
                       const std::vector<std::vector<std::int64_t>>& rows, unsigned seed) {
  std::int64_t S = 0;
  for (std::int64_t n : rows[0]) S += n;
  Problem p = make_problem(std::move(name), static_cast<std::int64_t>(rows.size()), H, Hkv, d,
                           range(0, S), range(0, S), seed);
  for (const auto& r : rows) {
    const DocIds ids = packed_row(r);
    EXPECT_EQ(static_cast<std::int64_t>(ids.size()), S);
    p.qd.insert(p.qd.end(), ids.begin(), ids.end());
  }
  p.kd = p.qd;
  return p;
}

TEST_P(Attention, PackedDocumentsOddLengths) {
  // A one-token document, documents shorter than a query block or a key tile, one crossing
  // key tiles (256) and query blocks, odd lengths, GQA; two rows with different boundaries.
  expect_matches_reference(packed_problem("short docs", 2, 1, 16, {{1, 3, 17, 1, 45}}, 41));
  expect_matches_reference(
      packed_problem("rows differ", 4, 2, 12, {{1, 66, 200, 33}, {150, 1, 1, 148}}, 42));
  expect_matches_reference(packed_problem("across tiles", 2, 2, 33, {{5, 301, 1, 290}}, 43));
  expect_matches_reference(packed_problem("one document", 2, 1, 16, {{131}}, 44));
}

TEST_P(Attention, ManyPackedDocuments) {
  ThreadCountGuard guard;
  std::mt19937 gen(45);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<std::int64_t> lengths;
    std::int64_t left = 557;
    while (left > 0) {  // documents of 1 to 40 tokens
      const std::int64_t n = std::min<std::int64_t>(left, 1 + static_cast<std::int64_t>(gen() % 40));
      lengths.push_back(n);
      left -= n;
    }
    set_thread_count(1 + trial % 2);
    expect_matches_reference(packed_problem(fmt::format("{} documents, {} threads", lengths.size(),
                                                        thread_count()),
                                            2, 1, 16, {lengths}, 46 + static_cast<unsigned>(trial)));
  }
}

TEST_P(Attention, PackedDocumentsOnContextParallelChunks) {
  // A rank's zigzag chunks with the document ids of its positions, against every key: the
  // ids follow the tokens, whatever the chunk (a document shorter than a chunk, one crossing
  // ranks).
  const std::int64_t D = 3, chunk = 37;
  const DocIds all = packed_row({1, 20, 100, 5, 1, 95});  // 222 = 2 * D * chunk
  const Positions keys = zigzag_all(D, chunk);
  DocIds kd;
  for (std::int64_t pos : keys) kd.push_back(all[static_cast<std::size_t>(pos)]);
  for (std::int64_t r = 0; r < D; ++r) {
    Problem p = make_problem(fmt::format("zigzag docs rank {}", r), 1, 2, 1, 16,
                             zigzag_rank(D, chunk, r), keys, static_cast<unsigned>(50 + r));
    for (std::int64_t pos : p.qp) p.qd.push_back(all[static_cast<std::size_t>(pos)]);
    p.kd = kd;
    expect_matches_reference(p);
  }
}

// Document ids in any order (the contract does not need them sorted), with random positions:
// document ranges that meet without a common id, tiles cut to nothing, rows that see nothing.
TEST_P(Attention, UnsortedDocumentIdsAndPositions) {
  std::mt19937 gen(61);
  for (int trial = 0; trial < 6; ++trial) {
    const std::int64_t q_len = 1 + static_cast<std::int64_t>(gen() % 200);
    const std::int64_t kv_len = 1 + static_cast<std::int64_t>(gen() % 600);
    Positions qp(static_cast<std::size_t>(q_len)), kp(static_cast<std::size_t>(kv_len));
    for (auto& x : qp) x = static_cast<std::int64_t>(gen() % 400);
    for (auto& x : kp) x = static_cast<std::int64_t>(gen() % 400);
    Problem p = make_problem(fmt::format("unsorted docs {}", trial), 2, 2, 1, 16, qp, kp,
                             70 + static_cast<unsigned>(trial));
    const unsigned docs = 1 + trial % 4;
    for (std::int64_t i = 0; i < 2 * q_len; ++i) p.qd.push_back(static_cast<std::int32_t>(gen() % docs));
    for (std::int64_t j = 0; j < 2 * kv_len; ++j) p.kd.push_back(static_cast<std::int32_t>(gen() % docs));
    expect_matches_reference(p);
  }
  // A tile whose ranges meet but whose every key is cut (the later one by position, the
  // earlier by a document after every query's): nothing visible, zero rows, lse -inf.
  Problem p = make_problem("cut to nothing", 1, 1, 1, 8, {5, 5}, {0, 10}, 80);
  p.qd = {0, 3};
  p.kd = {9, 0};
  expect_matches_reference(p);
  const KernelResult r = run_kernels(p);
  for (float x : r.out) EXPECT_EQ(x, 0.0f);
  for (float x : r.lse) EXPECT_TRUE(std::isinf(x) && x < 0);
}

TEST_P(Attention, TilesOfOtherDocumentsAreNotRead) {
  // Queries of document 1 (keys 256..511) and a first key tile wholly of document 0 holding
  // NaN: a tile computed and then masked would still carry NaN into P V (0 * NaN); skipped,
  // it leaves out, lse and every gradient exact, and its dK, dV untouched (zero).
  Problem p = make_problem("nan tile", 1, 2, 1, 16, range(256, 512), range(0, 512), 60);
  p.qd.assign(256, 1);
  p.kd = packed_row({256, 256});
  for (std::size_t i = 0; i < 256 * 16; ++i) {
    p.k[i] = std::nanf("");
    p.v[i] = std::nanf("");
  }
  expect_matches_reference(p);
}

TEST_P(Attention, KeysOfOtherDocumentsInSharedTilesAreNotRead) {
  // Queries of document 1 (positions 100..299) against keys 0..459 of documents 0 (0..99),
  // 1 and 2 (300..459), NaN in every key and value of documents 0 and 2: the first key tile
  // holds both documents 0 and 1, the second 1 and 2. Its leading keys (document 0, not a
  // whole vector: 100 = 6 * 16 + 4) and trailing ones (document 2, and after every query)
  // must be cut, forward and backward, never multiplied by a zero probability. Then out, lse
  // and every gradient are exact and the other documents' dK, dV stay zero.
  Problem p = make_problem("nan leading keys", 1, 2, 1, 16, range(100, 300), range(0, 460), 62);
  p.qd.assign(200, 1);
  p.kd = packed_row({100, 200, 160});
  for (std::int64_t j = 0; j < 460; ++j) {
    if (p.kd[static_cast<std::size_t>(j)] == 1) continue;
    for (std::int64_t c = 0; c < 16; ++c) {
      p.k[static_cast<std::size_t>(j * 16 + c)] = std::nanf("");
      p.v[static_cast<std::size_t>(j * 16 + c)] = std::nanf("");
    }
  }
  expect_matches_reference(p);
  // Blocks that hold several documents (the leading cut is per block: here it keeps the keys
  // of a block's first document), documents starting mid-tile and mid-vector, GQA.
  expect_matches_reference(
      packed_problem("documents mid-tile", 3, 1, 20, {{70, 150, 113, 3, 97}}, 63));
  // A context-parallel rank's later chunk with its documents, against all keys.
  Problem cp = packed_problem("chunk with documents", 2, 1, 16, {{45, 180, 108}}, 64);
  const std::int64_t first = 150;
  cp.qp = range(first, 333);
  cp.qd.erase(cp.qd.begin(), cp.qd.begin() + first);
  cp.q.resize(cp.qp.size() * 2 * 16);
  cp.dout.resize(cp.q.size());
  cp.s.q_len = static_cast<std::int64_t>(cp.qp.size());
  expect_matches_reference(cp);
}

TEST(AttentionChecks, DocumentFlopsCountPairsWithinDocuments) {
  const std::int64_t S = 96;
  const Positions all = range(0, S);
  const AttentionShape s{2, S, S, 4, 2, 64};
  const DocIds one = packed_row({S}), sixteen = packed_row(std::vector<std::int64_t>(16, 6));
  DocIds rows = one;
  rows.insert(rows.end(), sixteen.begin(), sixteen.end());
  // Row 0 one document of 96, row 1 sixteen of 6.
  EXPECT_EQ(attention_forward_flops(s, all.data(), all.data(), {rows.data(), rows.data()}),
            4.0 * 64 * 4 * (S * (S + 1) / 2 + 16 * (6 * 7 / 2)));
  EXPECT_THROW(attention_forward_flops(s, all.data(), all.data(), {rows.data(), nullptr}), Error);
}

ORIGAMI_ON_EVERY_SIMD_TARGET(Attention);

}  // namespace
}  // namespace origami::kernels
