// fp32 <-> bf16 on Highway vectors, compiled for every SIMD target and dispatched at run time
// (kernels/simd.h). The lanes are widened and rounded by bf16_vec-inl.h: every target gives the
// bits of core/bf16.h's to_bf16.
#include "origami/kernels/convert.h"

#include <algorithm>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/convert.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/bf16_vec-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::convert_simd::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

void ToBf16Range(std::int64_t i0, std::int64_t i1, const float* in, std::uint16_t* out) {
  ForEachVector(i1 - i0, [&](std::int64_t j, std::int64_t count) {
    StoreBf16(Load(in + i0 + j, count), out + i0 + j, count);
  });
}

void ToFloatRange(std::int64_t i0, std::int64_t i1, const std::uint16_t* in, float* out) {
  ForEachVector(i1 - i0, [&](std::int64_t j, std::int64_t count) {
    Store(LoadBf16(in + i0 + j, count), out + i0 + j, count);
  });
}

}  // namespace origami::kernels::convert_simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace convert_simd {
HWY_EXPORT(ToBf16Range);
HWY_EXPORT(ToFloatRange);
}  // namespace convert_simd

namespace {
constexpr std::int64_t kGrain = 32768;
}  // namespace

void convert_to_bf16(std::int64_t n, const float* in, bf16* out) {
  if (dryrun::skip_kernel(0)) return;  // dry run: element-wise work is not charged
  ORIGAMI_CHECK(n >= 0, "convert_to_bf16: negative size {}", n);
  std::uint16_t* o = bf16_bits(out);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    HWY_DYNAMIC_DISPATCH(convert_simd::ToBf16Range)(i0, i1, in, o);
  });
}

void convert_to_float(std::int64_t n, const bf16* in, float* out) {
  if (dryrun::skip_kernel(0)) return;
  ORIGAMI_CHECK(n >= 0, "convert_to_float: negative size {}", n);
  const std::uint16_t* b = bf16_bits(in);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    HWY_DYNAMIC_DISPATCH(convert_simd::ToFloatRange)(i0, i1, b, out);
  });
}

void round_floats_to_bf16(std::int64_t n, float* x) {
  if (dryrun::skip_kernel(0)) return;
  ORIGAMI_CHECK(n >= 0, "round_floats_to_bf16: negative size {}", n);
  constexpr std::int64_t kChunk = 4096;  // on the stack: the two conversions' vector paths
  bf16 b[kChunk];
  for (std::int64_t i = 0; i < n; i += kChunk) {
    const std::int64_t m = std::min(kChunk, n - i);
    convert_to_bf16(m, x + i, b);
    convert_to_float(m, b, x + i);
  }
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
