// SwiGLU on bf16 arrays (swiglu.h): swiglu.cpp's arithmetic in fp32 on the widened lanes
// (bf16_vec-inl.h), each bf16 output rounded once.
#include "origami/kernels/swiglu.h"

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/swiglu_bf16.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/bf16_vec-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::swiglu_bf16_simd::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

void ForwardRange(std::int64_t i0, std::int64_t i1, const std::uint16_t* a, const std::uint16_t* u,
                  std::uint16_t* g) {
  ForEachVector(i1 - i0, [&](std::int64_t j, std::int64_t count) {
    const std::int64_t i = i0 + j;
    const VF av = LoadBf16(a + i, count);
    StoreBf16(hn::Mul(hn::Mul(av, Sigmoid(av)), LoadBf16(u + i, count)), g + i, count);
  });
}

void BackwardRange(std::int64_t i0, std::int64_t i1, const std::uint16_t* a, const std::uint16_t* u,
                   const std::uint16_t* dg, std::uint16_t* da, std::uint16_t* du) {
  const DF d;
  const VF one = hn::Set(d, 1.0f);
  ForEachVector(i1 - i0, [&](std::int64_t j, std::int64_t count) {
    const std::int64_t i = i0 + j;
    const VF av = LoadBf16(a + i, count), uv = LoadBf16(u + i, count);
    const VF dgv = LoadBf16(dg + i, count);
    const VF s = Sigmoid(av);
    const VF silu = hn::Mul(av, s);
    // silu'(a) = s + a s (1 - s) = s (1 + a (1 - s))
    const VF dsilu = hn::Mul(s, hn::MulAdd(av, hn::Sub(one, s), one));
    StoreBf16(hn::MulAdd(hn::Mul(dgv, uv), dsilu, LoadBf16(da + i, count)), da + i, count);
    StoreBf16(hn::MulAdd(dgv, silu, LoadBf16(du + i, count)), du + i, count);
  });
}

}  // namespace origami::kernels::swiglu_bf16_simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace swiglu_bf16_simd {
HWY_EXPORT(ForwardRange);
HWY_EXPORT(BackwardRange);
}  // namespace swiglu_bf16_simd

namespace {
constexpr std::int64_t kGrain = 16384;
}  // namespace

void swiglu_forward_bf16(std::int64_t n, const bf16* a, const bf16* u, bf16* g) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  ORIGAMI_CHECK(n >= 0, "swiglu_forward_bf16: negative size {}", n);
  const std::uint16_t *ab = bf16_bits(a), *ub = bf16_bits(u);
  std::uint16_t* gb = bf16_bits(g);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    HWY_DYNAMIC_DISPATCH(swiglu_bf16_simd::ForwardRange)(i0, i1, ab, ub, gb);
  });
}

void swiglu_backward_bf16(std::int64_t n, const bf16* a, const bf16* u, const bf16* dg, bf16* da,
                          bf16* du) {
  if (dryrun::skip_kernel(0)) return;  // dry run: elementwise work is not charged
  ORIGAMI_CHECK(n >= 0, "swiglu_backward_bf16: negative size {}", n);
  const std::uint16_t *ab = bf16_bits(a), *ub = bf16_bits(u), *dgb = bf16_bits(dg);
  std::uint16_t *dab = bf16_bits(da), *dub = bf16_bits(du);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    HWY_DYNAMIC_DISPATCH(swiglu_bf16_simd::BackwardRange)(i0, i1, ab, ub, dgb, dab, dub);
  });
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
