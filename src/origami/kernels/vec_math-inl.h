// The vector helpers of the element-wise and row-wise kernels (RMSNorm, RoPE, SwiGLU,
// cross-entropy, AdamW, embedding, the communicator's reductions), written once over Highway's
// portable vectors and compiled for every SIMD target by the files that include it (each goes
// through hwy/foreach_target.h): e^x and the sigmoid, partial loads and stores for the last
// elements of a row, a loop over whole vectors with a partial last one, a row sum with vector
// accumulators, and the element-wise sum and max of two arrays. The vector width comes from the target.
//
// Per-target include guard (Highway's convention for "-inl.h" headers): the body is compiled
// once per target, inside that target's namespace.
#if defined(ORIGAMI_KERNELS_VEC_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ORIGAMI_KERNELS_VEC_MATH_INL_H_
#undef ORIGAMI_KERNELS_VEC_MATH_INL_H_
#else
#define ORIGAMI_KERNELS_VEC_MATH_INL_H_
#endif

#include <cstdint>
#include <cstring>

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::vec::HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Floats per vector of this target.
constexpr std::int64_t kFloatLanes = static_cast<std::int64_t>(HWY_LANES(float));

// The first `count` (< a vector) elements at p, zeros in the other lanes; reads nothing past
// p + count (a full-width load there could cross into an unmapped page).
template <class D>
HWY_INLINE hn::Vec<D> LoadPart(D d, const hn::TFromD<D>* p, std::int64_t count) {
  HWY_ALIGN hn::TFromD<D> buf[HWY_MAX_BYTES / sizeof(hn::TFromD<D>)] = {};
  std::memcpy(buf, p, static_cast<std::size_t>(count) * sizeof(hn::TFromD<D>));
  return hn::Load(d, buf);
}

// Writes the first `count` (< a vector) lanes of v to p, nothing past p + count.
template <class D>
HWY_INLINE void StorePart(D d, hn::Vec<D> v, hn::TFromD<D>* p, std::int64_t count) {
  HWY_ALIGN hn::TFromD<D> buf[HWY_MAX_BYTES / sizeof(hn::TFromD<D>)];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, static_cast<std::size_t>(count) * sizeof(hn::TFromD<D>));
}

// `count` elements at p: a whole vector when count is the lane count, else a partial one.
template <class D>
HWY_INLINE hn::Vec<D> Load(D d, const hn::TFromD<D>* p, std::int64_t count) {
  return count == static_cast<std::int64_t>(hn::Lanes(d)) ? hn::LoadU(d, p)
                                                           : LoadPart(d, p, count);
}
template <class D>
HWY_INLINE void Store(D d, hn::Vec<D> v, hn::TFromD<D>* p, std::int64_t count) {
  if (count == static_cast<std::int64_t>(hn::Lanes(d))) {
    hn::StoreU(v, d, p);
  } else {
    StorePart(d, v, p, count);
  }
}
HWY_INLINE VF Load(const float* p, std::int64_t count) { return Load(DF(), p, count); }
HWY_INLINE void Store(VF v, float* p, std::int64_t count) { Store(DF(), v, p, count); }

// body(i, count) for i = 0, N, 2N, ... < n with count = N (the lanes of d), then once for the
// last n % N elements. Called with the constant N in the main loop, so the inlined loads and
// stores of Load/Store above compile to plain full-width ones there.
template <class D, class Body>
HWY_INLINE void ForEachVector(D d, std::int64_t n, const Body& body) {
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
#pragma GCC unroll 4
  for (; i + N <= n; i += N) body(i, N);
  if (i < n) body(i, n - i);
}
template <class Body>
HWY_INLINE void ForEachVector(std::int64_t n, const Body& body) {
  ForEachVector(DF(), n, body);
}

// sum over i < n of the lanes of term(i, count) (the vector of elements [i, i + count)), with
// four vector accumulators: no serial chain of adds, and a fixed order (the sum depends on n
// and the target only, never on threads). Lanes past count are not added, whatever term gives
// there.
template <class D, class Term>
HWY_INLINE hn::TFromD<D> SumOver(D d, std::int64_t n, const Term& term) {
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  hn::Vec<D> a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  std::int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    a0 = hn::Add(a0, term(i, N));
    a1 = hn::Add(a1, term(i + N, N));
    a2 = hn::Add(a2, term(i + 2 * N, N));
    a3 = hn::Add(a3, term(i + 3 * N, N));
  }
  for (; i + N <= n; i += N) a0 = hn::Add(a0, term(i, N));
  if (i < n) {
    const auto part = hn::FirstN(d, static_cast<std::size_t>(n - i));
    a1 = hn::Add(a1, hn::IfThenElseZero(part, term(i, n - i)));
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}
template <class Term>
HWY_INLINE float SumOver(std::int64_t n, const Term& term) {
  return SumOver(DF(), n, term);
}

// acc[i] += in[i] for i < n (float, double, int32 or int64).
template <class T>
HWY_INLINE void AddInto(std::int64_t n, T* acc, const T* in) {
  const hn::ScalableTag<T> d;
  ForEachVector(d, n, [&](std::int64_t i, std::int64_t count) {
    Store(d, hn::Add(Load(d, acc + i, count), Load(d, in + i, count)), acc + i, count);
  });
}

// acc[i] = in[i] > acc[i] ? in[i] : acc[i] for i < n: a NaN in acc stays, one in `in` does not
// replace a number.
template <class T>
HWY_INLINE void MaxInto(std::int64_t n, T* acc, const T* in) {
  const hn::ScalableTag<T> d;
  ForEachVector(d, n, [&](std::int64_t i, std::int64_t count) {
    const auto a = Load(d, acc + i, count), b = Load(d, in + i, count);
#if HWY_ARCH_X86
    // x86's max(b, a) is exactly b > a ? b : a, NaN and signed zeros included: one instruction
    // (Highway's Max is x86's max with the operands in this order).
    Store(d, hn::Max(b, a), acc + i, count);
#else
    Store(d, hn::IfThenElse(hn::Gt(b, a), b, a), acc + i, count);
#endif
  });
}

// e^x, branch-free (Cephes expf: range reduction by ln 2, degree-6 polynomial), worst relative
// error 8.3e-8 over [-87, 88] (tests/kernels/vec_math_test.cpp, every target). Below -87 it
// returns 0 (so e^-inf = 0), above 88 it saturates at about e^88; NaN stays NaN.
HWY_INLINE VF Exp(VF x) {
  const DF d;
  const hn::RebindToUnsigned<DF> du;
  const VF lo = hn::Set(d, -87.0f), hi = hn::Set(d, 88.0f);
  // Selects rather than Min/Max: x86's min/max return the second operand for NaN, and a NaN
  // must come through.
  const auto below = hn::Lt(x, lo);
  VF xc = hn::IfThenElse(below, lo, x);
  xc = hn::IfThenElse(hn::Gt(xc, hi), hi, xc);
  // Adding 1.5 * 2^23 rounds to the nearest integer n = round(x / ln 2), in [-126, 127], which
  // then sits in the low mantissa bits (two's complement).
  const VF round = hn::Set(d, 12582912.0f);
  const VF t = hn::MulAdd(xc, hn::Set(d, 1.44269504088896341f), round);
  const VF n = hn::Sub(t, round);
  // ln 2 split in two so that r = x - n ln 2 keeps its precision.
  VF r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), xc);
  r = hn::MulAdd(n, hn::Set(d, 2.12194440e-4f), r);
  VF p = hn::Set(d, 1.9875691500e-4f);
  p = hn::MulAdd(p, r, hn::Set(d, 1.3981999507e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 8.3334519073e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.1665795894e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.6666665459e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 5.0000001201e-1f));
  const VF y = hn::Add(hn::MulAdd(hn::Mul(p, r), r, r), hn::Set(d, 1.0f));
  // The exponent field of 2^n is n + 127.
  const auto n_bits = hn::Sub(hn::BitCast(du, t), hn::Set(du, 0x4B400000u));
  const VF scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(n_bits, hn::Set(du, 127u))));
  // NaN: every step above keeps it (y is NaN, and NaN * scale is NaN).
  return hn::IfThenZeroElse(below, hn::Mul(y, scale));
}

// 1 / (1 + e^-x).
HWY_INLINE VF Sigmoid(VF x) {
  const DF d;
  const VF one = hn::Set(d, 1.0f);
  return hn::Div(one, hn::Add(one, Exp(hn::Neg(x))));
}

}  // namespace origami::kernels::vec::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
