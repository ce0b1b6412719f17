#include "origami/kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"
#include "origami/kernels/vec_math.h"

namespace origami::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

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

float row_max(const float* l, std::int64_t n) {
  float m = kNegInf;
#pragma omp simd reduction(max : m)
  for (std::int64_t c = 0; c < n; ++c) m = std::max(m, l[c]);
  return m;
}

float row_sum_exp(const float* l, std::int64_t n, float shift) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (std::int64_t c = 0; c < n; ++c) s += detail::exp_approx(l[c] - shift);
  return s;
}

// d[c] = scale * exp(l[c] - lse); d may be l. (A function with plain pointer parameters: in
// the caller's lambda GCC would reload the captured pointers after each store and not vectorise.)
void softmax_row(const float* l, std::int64_t n, float lse, float scale, float* d) {
#pragma omp simd
  for (std::int64_t c = 0; c < n; ++c) d[c] = scale * detail::exp_approx(l[c] - lse);
}

// Merges (max_b, sum_b) into (max_a, sum_a); an empty state is (-inf, 0).
void merge(float& max_a, float& sum_a, float max_b, float sum_b) {
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
    for (std::int64_t t = t0; t < t1; ++t) {
      const float* l = logits + t * cols;
      const float m = row_max(l, nv);
      merge(run_max[t], run_sum[t], m, row_sum_exp(l, nv, m));
      const std::int64_t y = targets[t];
      if (y >= col0 && y < col0 + nv) target_logit[t] = l[y - col0];
    }
  });
}

void softmax_stats_merge(std::int64_t tokens, float* max_a, float* sum_a, const float* max_b,
                         const float* sum_b) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  ORIGAMI_CHECK(tokens >= 0, "softmax_stats_merge: negative size {}", tokens);
  for (std::int64_t t = 0; t < tokens; ++t) merge(max_a[t], sum_a[t], max_b[t], sum_b[t]);
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
    for (std::int64_t t = t0; t < t1; ++t) {
      const float* l = logits + t * vocab;
      const float m = row_max(l, vocab);
      lse[t] = m + std::log(row_sum_exp(l, vocab, m));
    }
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
  });
}

}  // namespace origami::kernels
