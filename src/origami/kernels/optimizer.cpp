// AdamW and the pieces of gradient clipping on Highway vectors, compiled for every SIMD target
// and dispatched at run time (kernels/simd.h).
#include "origami/kernels/optimizer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

#ifndef ORIGAMI_KERNELS_OPTIMIZER_SHARED_  // once, not per target
#define ORIGAMI_KERNELS_OPTIMIZER_SHARED_
namespace origami::kernels::optimizer_simd {

// The per-step constants, rounded to float as torch rounds its Python scalars.
struct AdamScalars {
  float decay;       // 1 - lr * wd
  float beta1, w1;   // first moment: m * beta1 + w1 * g
  float beta2, w2;   // second moment: v * beta2 + w2 * g^2
  float step_size;   // lr / (1 - beta1^t)
  float bc2_sqrt;    // sqrt(1 - beta2^t)
  float eps;
};

}  // namespace origami::kernels::optimizer_simd
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/optimizer.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/bf16_vec-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::optimizer_simd::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

// torch's operations in torch's order (GCC may fuse a product and a sum into one multiply-add,
// as it did in the scalar loop; torch's vectorised kernels fuse some too).
// G: float, or the bits of bf16 gradients (--grad-reduce-dtype bf16), widened exactly.
template <class G>
void AdamWRange(std::int64_t i0, std::int64_t i1, const AdamScalars& k, float* param,
                const G* grad, float* m, float* v) {
  const DF d;
  const VF decay = hn::Set(d, k.decay), beta1 = hn::Set(d, k.beta1), w1 = hn::Set(d, k.w1);
  const VF beta2 = hn::Set(d, k.beta2), w2 = hn::Set(d, k.w2);
  const VF step_size = hn::Set(d, k.step_size), bc2_sqrt = hn::Set(d, k.bc2_sqrt);
  const VF eps = hn::Set(d, k.eps);
  ForEachVector(i1 - i0, [&](std::int64_t j, std::int64_t count) {
    const std::int64_t i = i0 + j;
    const VF g = LoadAs(grad + i, count);
    const VF p = hn::Mul(Load(param + i, count), decay);
    // The operation order of torch 1.13's AdamW (the installed oracle): m.mul_(b1).add_(g,
    // alpha=1-b1). torch >= 2.0 writes m.lerp_(g, 1-b1), one rounding apart.
    const VF mi = hn::Add(hn::Mul(Load(m + i, count), beta1), hn::Mul(w1, g));
    const VF vi = hn::Add(hn::Mul(Load(v + i, count), beta2), hn::Mul(w2, hn::Mul(g, g)));
    const VF denom = hn::Add(hn::Div(hn::Sqrt(vi), bc2_sqrt), eps);
    Store(mi, m + i, count);
    Store(vi, v + i, count);
    Store(hn::Sub(p, hn::Mul(step_size, hn::Div(mi, denom))), param + i, count);
  });
}

void AdamWF32(std::int64_t i0, std::int64_t i1, const AdamScalars& k, float* param,
              const float* grad, float* m, float* v) {
  AdamWRange(i0, i1, k, param, grad, m, v);
}
void AdamWBf16(std::int64_t i0, std::int64_t i1, const AdamScalars& k, float* param,
               const std::uint16_t* grad, float* m, float* v) {
  AdamWRange(i0, i1, k, param, grad, m, v);
}

// In double, on four vector accumulators (the squares of floats are exact in double).
template <class T>
double SumOfSquares(std::int64_t n, const T* x) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // as many floats as a vector has doubles
  return SumOver(dd, n, [&](std::int64_t i, std::int64_t count) {
    const auto xd = hn::PromoteTo(dd, LoadAs(df, x + i, count));
    return hn::Mul(xd, xd);
  });
}
double SumOfSquaresF32(std::int64_t n, const float* x) { return SumOfSquares(n, x); }
double SumOfSquaresBf16(std::int64_t n, const std::uint16_t* x) { return SumOfSquares(n, x); }

// x *= s in fp32; a bf16 x is rounded once after the product.
template <class T>
void ScaleRange(std::int64_t i0, std::int64_t i1, T* x, float s) {
  const VF sv = hn::Set(DF(), s);
  ForEachVector(i1 - i0, [&](std::int64_t j, std::int64_t count) {
    StoreAs(hn::Mul(LoadAs(x + i0 + j, count), sv), x + i0 + j, count);
  });
}
void ScaleF32(std::int64_t i0, std::int64_t i1, float* x, float s) { ScaleRange(i0, i1, x, s); }
void ScaleBf16(std::int64_t i0, std::int64_t i1, std::uint16_t* x, float s) {
  ScaleRange(i0, i1, x, s);
}

}  // namespace origami::kernels::optimizer_simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace optimizer_simd {
HWY_EXPORT(AdamWF32);
HWY_EXPORT(AdamWBf16);
HWY_EXPORT(SumOfSquaresF32);
HWY_EXPORT(SumOfSquaresBf16);
HWY_EXPORT(ScaleF32);
HWY_EXPORT(ScaleBf16);
}  // namespace optimizer_simd

namespace {

constexpr std::int64_t kGrain = 16384;

// The double whose shortest decimal is that of the float x (0.9f -> 0.9): the value a user
// who wrote x in a config file meant, as Python would hold it.
double as_written(float x) {
  char buf[32];
  const auto printed = std::to_chars(buf, buf + sizeof buf, x);
  double d = 0.0;
  std::from_chars(buf, printed.ptr, d);
  return d;
}

// The checks and per-step scalars of adamw_step, computed once for either gradient type.
optimizer_simd::AdamScalars adam_scalars(std::int64_t n, const AdamWHyper& hyper,
                                         std::int64_t step) {
  ORIGAMI_CHECK(n >= 0, "adamw_step: negative size {}", n);
  ORIGAMI_CHECK(step >= 1, "adamw_step: step is 1-based, got {}", step);
  ORIGAMI_CHECK(hyper.beta1 >= 0.0f && hyper.beta1 < 1.0f && hyper.beta2 >= 0.0f &&
                    hyper.beta2 < 1.0f,
                "adamw_step: betas must lie in [0, 1), got {} and {}", hyper.beta1, hyper.beta2);
  ORIGAMI_CHECK(hyper.lr >= 0.0f && hyper.eps >= 0.0f && hyper.weight_decay >= 0.0f,
                "adamw_step: lr, eps and weight_decay must be >= 0, got {}, {}, {}", hyper.lr,
                hyper.eps, hyper.weight_decay);
  // torch computes these scalars in Python doubles from the decimals the user wrote (0.9,
  // not the float nearest 0.9) and rounds them to float where they meet the fp32 tensors; do
  // the same (1 - 0.9f in double would round to a different float than 1 - 0.9).
  const double lr = as_written(hyper.lr);
  const double b1 = as_written(hyper.beta1);
  const double b2 = as_written(hyper.beta2);
  const auto t = static_cast<double>(step);
  const float decay = static_cast<float>(1.0 - lr * as_written(hyper.weight_decay));
  const float w1 = static_cast<float>(1.0 - b1);
  const auto beta2 = static_cast<float>(b2);
  const float w2 = static_cast<float>(1.0 - b2);
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(b1, t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(b2, t)));
  return {decay, static_cast<float>(b1), w1, beta2, w2, step_size, bc2_sqrt, hyper.eps};
}

}  // namespace

void adamw_step(std::int64_t n, float* param, const float* grad, float* m, float* v,
                const AdamWHyper& hyper, std::int64_t step) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  const optimizer_simd::AdamScalars k = adam_scalars(n, hyper, step);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    HWY_DYNAMIC_DISPATCH(optimizer_simd::AdamWF32)(i0, i1, k, param, grad, m, v);
  });
}

void adamw_step(std::int64_t n, float* param, const bf16* grad, float* m, float* v,
                const AdamWHyper& hyper, std::int64_t step) {
  if (dryrun::skip_kernel(0)) return;
  const optimizer_simd::AdamScalars k = adam_scalars(n, hyper, step);
  const std::uint16_t* g = bf16_bits(grad);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    HWY_DYNAMIC_DISPATCH(optimizer_simd::AdamWBf16)(i0, i1, k, param, g, m, v);
  });
}

double sum_of_squares(std::int64_t n, const float* x) {
  if (dryrun::skip_kernel(0)) return 0.0;  // dry run: elementwise work is not charged
  ORIGAMI_CHECK(n >= 0, "sum_of_squares: negative size {}", n);
  // One thread (the call is memory-bound) and a fixed order: the same result for any thread
  // count.
  return HWY_DYNAMIC_DISPATCH(optimizer_simd::SumOfSquaresF32)(n, x);
}

double sum_of_squares(std::int64_t n, const bf16* x) {
  if (dryrun::skip_kernel(0)) return 0.0;
  ORIGAMI_CHECK(n >= 0, "sum_of_squares: negative size {}", n);
  return HWY_DYNAMIC_DISPATCH(optimizer_simd::SumOfSquaresBf16)(n, bf16_bits(x));
}

void scale_inplace(std::int64_t n, float* x, float s) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  ORIGAMI_CHECK(n >= 0, "scale_inplace: negative size {}", n);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    HWY_DYNAMIC_DISPATCH(optimizer_simd::ScaleF32)(i0, i1, x, s);
  });
}

void scale_inplace(std::int64_t n, bf16* x, float s) {
  if (dryrun::skip_kernel(0)) return;
  ORIGAMI_CHECK(n >= 0, "scale_inplace: negative size {}", n);
  std::uint16_t* b = bf16_bits(x);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    HWY_DYNAMIC_DISPATCH(optimizer_simd::ScaleBf16)(i0, i1, b, s);
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
#endif  // HWY_ONCE
