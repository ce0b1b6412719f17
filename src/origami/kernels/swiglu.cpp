// SwiGLU g = silu(a) * u and its backward, element-wise on Highway vectors (vec_math-inl.h's
// e^x), compiled for every SIMD target and dispatched at run time (kernels/simd.h).
#include "origami/kernels/swiglu.h"

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/swiglu.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/vec_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::swiglu_simd::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

void ForwardRange(std::int64_t i0, std::int64_t i1, const float* a, const float* u, float* g) {
  ForEachVector(i1 - i0, [&](std::int64_t j, std::int64_t count) {
    const std::int64_t i = i0 + j;
    const VF av = Load(a + i, count);
    Store(hn::Mul(hn::Mul(av, Sigmoid(av)), Load(u + i, count)), g + i, count);
  });
}

void BackwardRange(std::int64_t i0, std::int64_t i1, const float* a, const float* u,
                   const float* dg, float* da, float* du) {
  const DF d;
  const VF one = hn::Set(d, 1.0f);
  ForEachVector(i1 - i0, [&](std::int64_t j, std::int64_t count) {
    const std::int64_t i = i0 + j;
    const VF av = Load(a + i, count), uv = Load(u + i, count), dgv = Load(dg + i, count);
    const VF s = Sigmoid(av);
    const VF silu = hn::Mul(av, s);
    // silu'(a) = s + a s (1 - s) = s (1 + a (1 - s))
    const VF dsilu = hn::Mul(s, hn::MulAdd(av, hn::Sub(one, s), one));
    Store(hn::MulAdd(hn::Mul(dgv, uv), dsilu, Load(da + i, count)), da + i, count);
    Store(hn::MulAdd(dgv, silu, Load(du + i, count)), du + i, count);
  });
}

}  // namespace origami::kernels::swiglu_simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace swiglu_simd {
HWY_EXPORT(ForwardRange);
HWY_EXPORT(BackwardRange);
}  // namespace swiglu_simd

namespace {
constexpr std::int64_t kGrain = 16384;
}  // namespace

void swiglu_forward(std::int64_t n, const float* a, const float* u, float* g) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  ORIGAMI_CHECK(n >= 0, "swiglu_forward: negative size {}", n);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    HWY_DYNAMIC_DISPATCH(swiglu_simd::ForwardRange)(i0, i1, a, u, g);
  });
}

void swiglu_backward(std::int64_t n, const float* a, const float* u, const float* dg, float* da,
                     float* du) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  ORIGAMI_CHECK(n >= 0, "swiglu_backward: negative size {}", n);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    HWY_DYNAMIC_DISPATCH(swiglu_simd::BackwardRange)(i0, i1, a, u, dg, da, du);
  });
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
