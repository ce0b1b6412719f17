#include "origami/kernels/optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

namespace origami::kernels {

namespace {

constexpr std::int64_t kGrain = 16384;

// The per-step constants, rounded to float as torch rounds its Python scalars.
struct AdamScalars {
  float decay;       // 1 - lr * wd
  float w1, w1c;     // lerp weight of the first moment (1 - beta1) and 1 - w1
  bool lerp_low;     // torch's lerp branch: w1 < 0.5
  float beta2, w2;   // second moment: v * beta2 + w2 * g^2
  float step_size;   // lr / (1 - beta1^t)
  float bc2_sqrt;    // sqrt(1 - beta2^t)
  float eps;
};

// A function with plain pointer parameters (not a lambda's captures, which GCC reloads after
// every store and then does not vectorise).
void adamw_range(std::int64_t i0, std::int64_t i1, const AdamScalars k, float* param,
                 const float* grad, float* m, float* v) {
  const float decay = k.decay, w1 = k.w1, w1c = k.w1c, beta2 = k.beta2, w2 = k.w2;
  const float step_size = k.step_size, bc2_sqrt = k.bc2_sqrt, eps = k.eps;
  const bool lerp_low = k.lerp_low;
#pragma omp simd
  for (std::int64_t i = i0; i < i1; ++i) {
    const float g = grad[i];
    const float p = param[i] * decay;
    // torch's lerp(m, g, w) = w < 0.5 ? m + w (g - m) : g - (g - m)(1 - w)
    const float d = g - m[i];
    const float mi = lerp_low ? m[i] + w1 * d : g - d * w1c;
    const float vi = v[i] * beta2 + w2 * (g * g);
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    m[i] = mi;
    v[i] = vi;
    param[i] = p - step_size * (mi / denom);
  }
}

void scale_range(std::int64_t i0, std::int64_t i1, float* x, float s) {
#pragma omp simd
  for (std::int64_t i = i0; i < i1; ++i) x[i] *= s;
}

}  // namespace

void adamw_step(std::int64_t n, float* param, const float* grad, float* m, float* v,
                const AdamWHyper& hyper, std::int64_t step) {
  ORIGAMI_CHECK(n >= 0, "adamw_step: negative size {}", n);
  ORIGAMI_CHECK(step >= 1, "adamw_step: step is 1-based, got {}", step);
  ORIGAMI_CHECK(hyper.beta1 >= 0.0f && hyper.beta1 < 1.0f && hyper.beta2 >= 0.0f &&
                    hyper.beta2 < 1.0f,
                "adamw_step: betas must lie in [0, 1), got {} and {}", hyper.beta1, hyper.beta2);
  ORIGAMI_CHECK(hyper.lr >= 0.0f && hyper.eps >= 0.0f && hyper.weight_decay >= 0.0f,
                "adamw_step: lr, eps and weight_decay must be >= 0, got {}, {}, {}", hyper.lr,
                hyper.eps, hyper.weight_decay);
  // The scalars are Python floats (double) in torch, rounded to float where they meet the
  // fp32 tensors; do the same.
  const double lr = hyper.lr;
  const double b1 = hyper.beta1;
  const double b2 = hyper.beta2;
  const auto t = static_cast<double>(step);
  const float decay = static_cast<float>(1.0 - lr * static_cast<double>(hyper.weight_decay));
  const float w1 = static_cast<float>(1.0 - b1);  // lerp weight of the first moment
  const float beta2 = hyper.beta2;
  const float w2 = static_cast<float>(1.0 - b2);
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(b1, t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(b2, t)));
  const AdamScalars k{decay, w1, 1.0f - w1, w1 < 0.5f, beta2, w2, step_size, bc2_sqrt, hyper.eps};
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    adamw_range(i0, i1, k, param, grad, m, v);
  });
}

double sum_of_squares(std::int64_t n, const float* x) {
  ORIGAMI_CHECK(n >= 0, "sum_of_squares: negative size {}", n);
  // Eight independent double accumulators in a fixed order: vectorisable and the same result
  // for any thread count (the call is memory-bound, one thread suffices).
  constexpr int kLanes = 8;
  double acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const double xi = x[i + k];
      acc[k] += xi * xi;
    }
  }
  for (int k = 0; i < n; ++i, ++k) {
    const double xi = x[i];
    acc[k] += xi * xi;
  }
  double total = 0.0;
  for (double a : acc) total += a;
  return total;
}

void scale_inplace(std::int64_t n, float* x, float s) {
  ORIGAMI_CHECK(n >= 0, "scale_inplace: negative size {}", n);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    scale_range(i0, i1, x, s);
  });
}

float clip_coefficient(double total_norm, double max_norm) {
  ORIGAMI_CHECK(max_norm > 0.0, "clip_coefficient: max_norm must be > 0, got {}", max_norm);
  ORIGAMI_CHECK(!(total_norm < 0.0), "clip_coefficient: a norm cannot be negative, got {}",
                total_norm);
  // As torch: clamp(max_norm / (total_norm + 1e-6), max=1). A non-finite norm gives NaN or 0
  // (torch does the same unless error_if_nonfinite), which the caller sees in its loss.
  const double coef = max_norm / (total_norm + 1e-6);
  if (std::isnan(coef)) return std::numeric_limits<float>::quiet_NaN();
  return static_cast<float>(std::min(coef, 1.0));
}

}  // namespace origami::kernels
