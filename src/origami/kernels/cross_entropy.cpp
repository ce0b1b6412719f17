// Blockwise cross-entropy: per token, the running max and sum of exponentials over vocabulary
// blocks, merged by log-sum-exp, and the softmax gradient. The row loops run on Highway
// vectors (vec_math-inl.h's e^x), compiled for every SIMD target and dispatched at run time
// (kernels/simd.h); each row's max and sum use vector accumulators in a fixed order.
#include "origami/kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

#ifndef ORIGAMI_KERNELS_CROSS_ENTROPY_SHARED_  // once, not per target
#define ORIGAMI_KERNELS_CROSS_ENTROPY_SHARED_
namespace origami::kernels::xent_simd {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Merges (max_b, sum_b) into (max_a, sum_a); an empty state is (-inf, 0).
inline void merge(float& max_a, float& sum_a, float max_b, float sum_b) {
  if (max_b == kNegInf) return;
  if (max_a == kNegInf) {
    max_a = max_b;
    sum_a = sum_b;
    return;
  }
  const float m = std::max(max_a, max_b);
  sum_a = sum_a * std::exp(max_a - m) + sum_b * std::exp(max_b - m);
  max_a = m;
}

}  // namespace origami::kernels::xent_simd
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/cross_entropy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/vec_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::xent_simd::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

// The largest of l[0, n), n >= 1, on four vector accumulators. A NaN may or may not win here
// (x86's max returns its second operand for NaN); it reaches the sum of exponentials either way.
float row_max(const float* l, std::int64_t n) {
  const DF d;
  constexpr std::int64_t N = kFloatLanes;
  const VF ninf = hn::Set(d, kNegInf);
  VF m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
  std::int64_t c = 0;
  for (; c + 4 * N <= n; c += 4 * N) {
    m0 = hn::Max(m0, hn::LoadU(d, l + c));
    m1 = hn::Max(m1, hn::LoadU(d, l + c + N));
    m2 = hn::Max(m2, hn::LoadU(d, l + c + 2 * N));
    m3 = hn::Max(m3, hn::LoadU(d, l + c + 3 * N));
  }
  for (; c + N <= n; c += N) m0 = hn::Max(m0, hn::LoadU(d, l + c));
  if (c < n) {
    const auto part = hn::FirstN(d, static_cast<std::size_t>(n - c));
    m1 = hn::Max(m1, hn::IfThenElse(part, LoadPart(d, l + c, n - c), ninf));
  }
  return hn::GetLane(hn::MaxOfLanes(d, hn::Max(hn::Max(m0, m1), hn::Max(m2, m3))));
}

// sum_c e^(l[c] - shift) over [0, n).
float row_sum_exp(const float* l, std::int64_t n, float shift) {
  const VF s = hn::Set(DF(), shift);
  return SumOver(n, [&](std::int64_t c, std::int64_t count) {
    return Exp(hn::Sub(Load(l + c, count), s));
  });
}

// d[c] = scale * e^(l[c] - lse) over [0, n); d may be l (each vector is read before it is
// written).
void softmax_row(const float* l, std::int64_t n, float lse, float scale, float* d) {
  const VF lsev = hn::Set(DF(), lse), scalev = hn::Set(DF(), scale);
  ForEachVector(n, [&](std::int64_t c, std::int64_t count) {
    Store(hn::Mul(scalev, Exp(hn::Sub(Load(l + c, count), lsev))), d + c, count);
  });
}

// softmax_stats_update for the tokens [t0, t1) of a block whose first nv >= 1 columns are real.
void StatsRows(std::int64_t t0, std::int64_t t1, std::int64_t cols, const float* logits,
               std::int64_t col0, std::int64_t nv, const std::int32_t* targets, float* run_max,
               float* run_sum, float* target_logit) {
  for (std::int64_t t = t0; t < t1; ++t) {
    const float* l = logits + t * cols;
    const float m = row_max(l, nv);
    merge(run_max[t], run_sum[t], m, row_sum_exp(l, nv, m));
    const std::int64_t y = targets[t];
    if (y >= col0 && y < col0 + nv) target_logit[t] = l[y - col0];
  }
}

// lse of the tokens [t0, t1) over a whole vocabulary (>= 1 column).
void LseRows(std::int64_t t0, std::int64_t t1, std::int64_t vocab, const float* logits,
             float* lse) {
  for (std::int64_t t = t0; t < t1; ++t) {
    const float* l = logits + t * vocab;
    const float m = row_max(l, vocab);
    lse[t] = m + std::log(row_sum_exp(l, vocab, m));
  }
}

// cross_entropy_backward for the tokens [t0, t1).
void BackwardRows(std::int64_t t0, std::int64_t t1, std::int64_t cols, const float* logits,
                  std::int64_t col0, std::int64_t nv, const std::int32_t* targets,
                  const float* lse, float scale, float* dlogits) {
  for (std::int64_t t = t0; t < t1; ++t) {
    const float* l = logits + t * cols;
    float* d = dlogits + t * cols;
    const std::int32_t y = targets[t];
    if (y == kIgnoreLabel) {
      std::fill(d, d + cols, 0.0f);  // masked: zero even if its logits are not finite
      continue;
    }
    softmax_row(l, nv, lse[t], scale, d);
    std::fill(d + nv, d + cols, 0.0f);
    if (y >= col0 && y < col0 + nv) d[y - col0] -= scale;
  }
}

}  // namespace origami::kernels::xent_simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace xent_simd {
HWY_EXPORT(StatsRows);
HWY_EXPORT(LseRows);
HWY_EXPORT(BackwardRows);
}  // namespace xent_simd

namespace {

// Targets are the ignore label or a real (unpadded) vocabulary entry.
void check_targets(const char* what, std::int64_t tokens, const std::int32_t* targets,
                   std::int64_t valid_vocab) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int32_t y = targets[t];
    ORIGAMI_CHECK(y == kIgnoreLabel || (y >= 0 && y < valid_vocab),
                  "{}: target {} of token {} is neither {} (ignored) nor in [0, {})", what, y, t,
                  kIgnoreLabel, valid_vocab);
  }
}

void check_block(const char* what, std::int64_t tokens, std::int64_t cols, std::int64_t col0,
                 std::int64_t valid_vocab) {
  ORIGAMI_CHECK(tokens >= 0 && cols >= 0, "{}: negative size tokens={} cols={}", what, tokens,
                cols);
  ORIGAMI_CHECK(col0 >= 0 && valid_vocab >= 0,
                "{}: negative first column {} or valid vocabulary {}", what, col0, valid_vocab);
}

// Columns of this block that are real vocabulary entries (the rest is padding).
std::int64_t valid_cols(std::int64_t cols, std::int64_t col0, std::int64_t valid_vocab) {
  return std::clamp<std::int64_t>(valid_vocab - col0, 0, cols);
}

// The dry run's loss: no logits exist, so the sum is 0; the count of unmasked targets is real
// (token ids stay backed), so the schedules' normalisation sees the true count.
LossSum dry_run_loss(std::int64_t tokens, const std::int32_t* targets) {
  LossSum out;
  for (std::int64_t t = 0; t < tokens; ++t) out.count += targets[t] != kIgnoreLabel ? 1 : 0;
  return out;
}

}  // namespace

void softmax_stats_update(std::int64_t tokens, std::int64_t cols, const float* logits,
                          std::int64_t col0, std::int64_t valid_vocab,
                          const std::int32_t* targets, float* run_max, float* run_sum,
                          float* target_logit) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  check_block("softmax_stats_update", tokens, cols, col0, valid_vocab);
  check_targets("softmax_stats_update", tokens, targets, valid_vocab);
  const std::int64_t nv = valid_cols(cols, col0, valid_vocab);
  if (nv == 0) return;  // a block of padding only
  detail::parallel_for(tokens, detail::rows_per_chunk(cols), [=](std::int64_t t0,
                                                                 std::int64_t t1) {
    HWY_DYNAMIC_DISPATCH(xent_simd::StatsRows)(t0, t1, cols, logits, col0, nv, targets, run_max,
                                               run_sum, target_logit);
  });
}

void softmax_stats_merge(std::int64_t tokens, float* max_a, float* sum_a, const float* max_b,
                         const float* sum_b) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  ORIGAMI_CHECK(tokens >= 0, "softmax_stats_merge: negative size {}", tokens);
  for (std::int64_t t = 0; t < tokens; ++t)
    xent_simd::merge(max_a[t], sum_a[t], max_b[t], sum_b[t]);
}

LossSum softmax_stats_finish(std::int64_t tokens, const float* run_max, const float* run_sum,
                             const float* target_logit, const std::int32_t* targets, float* lse) {
  if (dryrun::skip_kernel(0)) return dry_run_loss(tokens, targets);
  ORIGAMI_CHECK(tokens >= 0, "softmax_stats_finish: negative size {}", tokens);
  LossSum out;
  for (std::int64_t t = 0; t < tokens; ++t) {
    lse[t] = run_max[t] + std::log(run_sum[t]);
    if (targets[t] == kIgnoreLabel) continue;
    out.sum += static_cast<double>(lse[t]) - static_cast<double>(target_logit[t]);
    ++out.count;
  }
  return out;
}

LossSum cross_entropy_forward(std::int64_t tokens, std::int64_t vocab, const float* logits,
                              const std::int32_t* targets, float* lse) {
  if (dryrun::skip_kernel(0)) return dry_run_loss(tokens, targets);
  check_block("cross_entropy_forward", tokens, vocab, 0, vocab);
  ORIGAMI_CHECK(tokens == 0 || vocab > 0, "cross_entropy_forward: empty vocabulary");
  check_targets("cross_entropy_forward", tokens, targets, vocab);
  detail::parallel_for(tokens, detail::rows_per_chunk(vocab), [=](std::int64_t t0,
                                                                  std::int64_t t1) {
    HWY_DYNAMIC_DISPATCH(xent_simd::LseRows)(t0, t1, vocab, logits, lse);
  });
  // The loss sum in token order (not per thread): the same value for any thread count.
  LossSum out;
  for (std::int64_t t = 0; t < tokens; ++t) {
    if (targets[t] == kIgnoreLabel) continue;
    out.sum += static_cast<double>(lse[t]) - static_cast<double>(logits[t * vocab + targets[t]]);
    ++out.count;
  }
  return out;
}

void cross_entropy_backward(std::int64_t tokens, std::int64_t cols, const float* logits,
                            std::int64_t col0, std::int64_t valid_vocab,
                            const std::int32_t* targets, const float* lse, float scale,
                            float* dlogits) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  check_block("cross_entropy_backward", tokens, cols, col0, valid_vocab);
  check_targets("cross_entropy_backward", tokens, targets, valid_vocab);
  const std::int64_t nv = valid_cols(cols, col0, valid_vocab);
  // No restrict: dlogits may be logits itself; each element is read before it is written.
  detail::parallel_for(tokens, detail::rows_per_chunk(cols), [=](std::int64_t t0,
                                                                 std::int64_t t1) {
    HWY_DYNAMIC_DISPATCH(xent_simd::BackwardRows)(t0, t1, cols, logits, col0, nv, targets, lse,
                                                  scale, dlogits);
  });
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
