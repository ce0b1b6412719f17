// fp32 <-> bf16 on Highway vectors, compiled for every SIMD target and dispatched at run time
// (kernels/simd.h). The rounding is written out in integer operations rather than taken from
// Highway's DemoteTo to bfloat16, which truncates on some targets: every target must give the
// bits of core/bf16.h's to_bf16.
#include "origami/kernels/convert.h"

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/kernels/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/convert.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/vec_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::convert_simd::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

using DU32 = hn::RebindToUnsigned<DF>;
using DI32 = hn::RebindToSigned<DF>;
using DU16 = hn::Rebind<std::uint16_t, DF>;  // as many lanes as DF, half the width

void ToBf16Range(std::int64_t i0, std::int64_t i1, const float* in, std::uint16_t* out) {
  const DU32 du;
  const DI32 di;
  const DU16 d16;
  const auto one = hn::Set(du, 1u);
  const auto half_minus_one = hn::Set(du, 0x7fffu);
  const auto quiet = hn::Set(du, 0x00400000u);
  ForEachVector(i1 - i0, [&](std::int64_t j, std::int64_t count) {
    const std::int64_t i = i0 + j;
    const VF v = Load(in + i, count);
    const auto u = hn::BitCast(du, v);
    const auto rounded = hn::Add(u, hn::Add(half_minus_one, hn::And(hn::ShiftRight<16>(u), one)));
    const auto nan = hn::RebindMask(du, hn::IsNaN(v));  // not Ne(v, v): ordered on x86
    const auto top = hn::ShiftRight<16>(hn::IfThenElse(nan, hn::Or(u, quiet), rounded));
    // top <= 0xffff, so the saturating i32 -> u16 demotion only narrows.
    Store(d16, hn::DemoteTo(d16, hn::BitCast(di, top)), out + i, count);
  });
}

void ToFloatRange(std::int64_t i0, std::int64_t i1, const std::uint16_t* in, float* out) {
  const DF df;
  const DU32 du;
  const DU16 d16;
  ForEachVector(i1 - i0, [&](std::int64_t j, std::int64_t count) {
    const std::int64_t i = i0 + j;
    const auto wide = hn::PromoteTo(du, Load(d16, in + i, count));
    Store(hn::BitCast(df, hn::ShiftLeft<16>(wide)), out + i, count);
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

// bf16 is a struct of one uint16_t: its arrays are arrays of those bits.
const std::uint16_t* bits_of(const bf16* p) { return reinterpret_cast<const std::uint16_t*>(p); }
std::uint16_t* bits_of(bf16* p) { return reinterpret_cast<std::uint16_t*>(p); }
}  // namespace

void convert_to_bf16(std::int64_t n, const float* in, bf16* out) {
  if (dryrun::skip_kernel(0)) return;  // dry run: element-wise work is not charged
  ORIGAMI_CHECK(n >= 0, "convert_to_bf16: negative size {}", n);
  std::uint16_t* o = bits_of(out);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    HWY_DYNAMIC_DISPATCH(convert_simd::ToBf16Range)(i0, i1, in, o);
  });
}

void convert_to_float(std::int64_t n, const bf16* in, float* out) {
  if (dryrun::skip_kernel(0)) return;
  ORIGAMI_CHECK(n >= 0, "convert_to_float: negative size {}", n);
  const std::uint16_t* b = bits_of(in);
  detail::parallel_for(n, kGrain, [=](std::int64_t i0, std::int64_t i1) {
    HWY_DYNAMIC_DISPATCH(convert_simd::ToFloatRange)(i0, i1, b, out);
  });
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
