// bf16 lanes on Highway vectors, for the kernels that read and write bf16 arrays (convert.cpp,
// rmsnorm.cpp, swiglu.cpp, rope.cpp): a load that widens `count` bf16 values to
// a float vector (exact) and a store that narrows a float vector to bf16, rounding to nearest,
// ties to even, NaN kept a quiet NaN of the same sign (core/bf16.h's to_bf16, bit for bit). The
// rounding is written out in integer operations rather than taken from Highway's DemoteTo to
// bfloat16, which truncates on some targets. Kernels keep their arithmetic in fp32 between a
// LoadBf16 and a StoreBf16, so each bf16 output is rounded once.
//
// Per-target include guard (Highway's convention for "-inl.h" headers), after the part that
// the targets share.
#ifndef ORIGAMI_KERNELS_BF16_VEC_SHARED_
#define ORIGAMI_KERNELS_BF16_VEC_SHARED_
#include <cstdint>

#include "origami/core/bf16.h"

namespace origami::kernels {
// bf16 is a struct of one uint16_t: its arrays are arrays of those bits.
inline const std::uint16_t* bf16_bits(const bf16* p) {
  return reinterpret_cast<const std::uint16_t*>(p);
}
inline std::uint16_t* bf16_bits(bf16* p) {
  return reinterpret_cast<std::uint16_t*>(p);
}
}  // namespace origami::kernels
#endif

#if defined(ORIGAMI_KERNELS_BF16_VEC_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ORIGAMI_KERNELS_BF16_VEC_INL_H_
#undef ORIGAMI_KERNELS_BF16_VEC_INL_H_
#else
#define ORIGAMI_KERNELS_BF16_VEC_INL_H_
#endif

#include "origami/kernels/vec_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::vec::HWY_NAMESPACE {

using DU16 = hn::Rebind<std::uint16_t, DF>;  // as many lanes as DF, half the width

// The `count` (<= the lanes of df) bf16 values at p as floats (exact); zeros in the other lanes.
template <class DFloat>
HWY_INLINE hn::Vec<DFloat> LoadBf16(DFloat df, const std::uint16_t* p, std::int64_t count) {
  const hn::RebindToUnsigned<DFloat> du;
  const hn::Rebind<std::uint16_t, DFloat> d16;
  const auto wide = hn::PromoteTo(du, Load(d16, p, count));
  return hn::BitCast(df, hn::ShiftLeft<16>(wide));
}
HWY_INLINE VF LoadBf16(const std::uint16_t* p, std::int64_t count) {
  return LoadBf16(DF(), p, count);
}

// Writes the first `count` (<= a vector) lanes of v to p as bf16, rounded to nearest even;
// nothing past p + count.
HWY_INLINE void StoreBf16(VF v, std::uint16_t* p, std::int64_t count) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const DU16 d16;
  const auto u = hn::BitCast(du, v);
  const auto round_to_even =
      hn::Add(hn::Set(du, 0x7fffu), hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)));
  const auto nan = hn::RebindMask(du, hn::IsNaN(v));  // not Ne(v, v): ordered on x86
  const auto top = hn::ShiftRight<16>(
      hn::IfThenElse(nan, hn::Or(u, hn::Set(du, 0x00400000u)), hn::Add(u, round_to_even)));
  // top <= 0xffff, so the saturating i32 -> u16 demotion only narrows.
  Store(d16, hn::DemoteTo(d16, hn::BitCast(di, top)), p, count);
}

// One kernel body for both element types (T = float, or std::uint16_t holding bf16 bits): the
// fp32 kernels and their bf16 variants are the same template, so their arithmetic cannot drift.
template <class DFloat>
HWY_INLINE hn::Vec<DFloat> LoadAs(DFloat d, const float* p, std::int64_t count) {
  return Load(d, p, count);
}
template <class DFloat>
HWY_INLINE hn::Vec<DFloat> LoadAs(DFloat d, const std::uint16_t* p, std::int64_t count) {
  return LoadBf16(d, p, count);
}
HWY_INLINE VF LoadAs(const float* p, std::int64_t count) { return Load(p, count); }
HWY_INLINE VF LoadAs(const std::uint16_t* p, std::int64_t count) { return LoadBf16(p, count); }
HWY_INLINE void StoreAs(VF v, float* p, std::int64_t count) { Store(v, p, count); }
HWY_INLINE void StoreAs(VF v, std::uint16_t* p, std::int64_t count) { StoreBf16(v, p, count); }

}  // namespace origami::kernels::vec::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
