// SwiGLU g = silu(a) * u and its backward, element-wise on Highway vectors (vec_math-inl.h's
// e^x), compiled for every SIMD target and dispatched at run time (kernels/simd.h); one body
// serves fp32 and bf16 arrays (bf16_vec-inl.h's LoadAs/StoreAs).
#include "origami/kernels/swiglu.h"

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/swiglu.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/bf16_vec-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::swiglu_simd::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

// T: float, or bf16 bits (widened on load, each output rounded once; a bf16 += is widened,
// added in fp32 and rounded once).
template <class T>
void ForwardRangeOf(std::int64_t i0, std::int64_t i1, const T* a, const T* u, T* g) {
  ForEachVector(i1 - i0, [&](std::int64_t j, std::int64_t count) {
    const std::int64_t i = i0 + j;
    const VF av = LoadAs(a + i, count);
    StoreAs(hn::Mul(hn::Mul(av, Sigmoid(av)), LoadAs(u + i, count)), g + i, count);
  });
}

template <class T>
void BackwardRangeOf(std::int64_t i0, std::int64_t i1, const T* a, const T* u, const T* dg, T* da,
                     T* du) {
  const DF d;
  const VF one = hn::Set(d, 1.0f);
  ForEachVector(i1 - i0, [&](std::int64_t j, std::int64_t count) {
    const std::int64_t i = i0 + j;
    const VF av = LoadAs(a + i, count), uv = LoadAs(u + i, count), dgv = LoadAs(dg + i, count);
    const VF s = Sigmoid(av);
    const VF silu = hn::Mul(av, s);
    // silu'(a) = s + a s (1 - s) = s (1 + a (1 - s))
    const VF dsilu = hn::Mul(s, hn::MulAdd(av, hn::Sub(one, s), one));
    StoreAs(hn::MulAdd(hn::Mul(dgv, uv), dsilu, LoadAs(da + i, count)), da + i, count);
    StoreAs(hn::MulAdd(dgv, silu, LoadAs(du + i, count)), du + i, count);
  });
}

void ForwardRange(std::int64_t i0, std::int64_t i1, const float* a, const float* u, float* g) {
  ForwardRangeOf(i0, i1, a, u, g);
}
void ForwardRangeBf16(std::int64_t i0, std::int64_t i1, const std::uint16_t* a,
                      const std::uint16_t* u, std::uint16_t* g) {
  ForwardRangeOf(i0, i1, a, u, g);
}
void BackwardRange(std::int64_t i0, std::int64_t i1, const float* a, const float* u,
                   const float* dg, float* da, float* du) {
  BackwardRangeOf(i0, i1, a, u, dg, da, du);
}
void BackwardRangeBf16(std::int64_t i0, std::int64_t i1, const std::uint16_t* a,
                       const std::uint16_t* u, const std::uint16_t* dg, std::uint16_t* da,
                       std::uint16_t* du) {
  BackwardRangeOf(i0, i1, a, u, dg, da, du);
}

}  // namespace origami::kernels::swiglu_simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace swiglu_simd {
HWY_EXPORT(ForwardRange);
HWY_EXPORT(BackwardRange);
HWY_EXPORT(ForwardRangeBf16);
HWY_EXPORT(BackwardRangeBf16);
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

void swiglu_forward_bf16(std::int64_t n, const bf16* a, const bf16* u, bf16* g) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  ORIGAMI_CHECK(n >= 0, "swiglu_forward_bf16: negative size {}", n);
  const std::uint16_t *ab = bf16_bits(a), *ub = bf16_bits(u);
  std::uint16_t* gb = bf16_bits(g);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    HWY_DYNAMIC_DISPATCH(swiglu_simd::ForwardRangeBf16)(i0, i1, ab, ub, gb);
  });
}

void swiglu_backward_bf16(std::int64_t n, const bf16* a, const bf16* u, const bf16* dg, bf16* da,
                          bf16* du) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  ORIGAMI_CHECK(n >= 0, "swiglu_backward_bf16: negative size {}", n);
  const std::uint16_t *ab = bf16_bits(a), *ub = bf16_bits(u), *dgb = bf16_bits(dg);
  std::uint16_t *dab = bf16_bits(da), *dub = bf16_bits(du);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    HWY_DYNAMIC_DISPATCH(swiglu_simd::BackwardRangeBf16)(i0, i1, ab, ub, dgb, dab, dub);
  });
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
