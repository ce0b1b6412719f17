// The element-wise sums and maxima of reduce.h and its plain sum, per target (vec_math-inl.h's
// AddInto, MaxInto, SumOver; bf16_vec-inl.h's widening loads and rounding stores for the bf16
// sums).
#include "origami/kernels/reduce.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "origami/kernels/reduce.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/bf16_vec-inl.h"

// One exported function per operation and element type (Highway exports plain functions).
#define ORIGAMI_REDUCE_KERNELS(X)            \
  X(AddF32, AddInto, add_into, float)        \
  X(AddF64, AddInto, add_into, double)       \
  X(AddI32, AddInto, add_into, std::int32_t) \
  X(AddI64, AddInto, add_into, std::int64_t) \
  X(MaxF32, MaxInto, max_into, float)        \
  X(MaxF64, MaxInto, max_into, double)       \
  X(MaxI32, MaxInto, max_into, std::int32_t) \
  X(MaxI64, MaxInto, max_into, std::int64_t)

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::reduce_simd::HWY_NAMESPACE {
using namespace vec::HWY_NAMESPACE;

#define ORIGAMI_DEFINE(name, op, public_name, T) \
  void name(std::int64_t n, T* acc, const T* in) { op(n, acc, in); }
ORIGAMI_REDUCE_KERNELS(ORIGAMI_DEFINE)
#undef ORIGAMI_DEFINE
// bf16 accumulators: widened, added in fp32, rounded once (bf16_vec-inl.h). `In` is float or
// the bits of bf16.
template <class In>
void AddIntoBf16(std::int64_t n, std::uint16_t* acc, const In* in) {
  ForEachVector(n, [&](std::int64_t i, std::int64_t count) {
    StoreBf16(hn::Add(LoadBf16(acc + i, count), LoadAs(in + i, count)), acc + i, count);
  });
}
void AddBf16Bf16(std::int64_t n, std::uint16_t* acc, const std::uint16_t* in) {
  AddIntoBf16(n, acc, in);
}
void AddBf16F32(std::int64_t n, std::uint16_t* acc, const float* in) { AddIntoBf16(n, acc, in); }

float Sum(std::int64_t n, const float* x) {
  return SumOver(n, [&](std::int64_t i, std::int64_t count) { return Load(x + i, count); });
}

}  // namespace origami::kernels::reduce_simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace origami::kernels {
namespace reduce_simd {
#define ORIGAMI_EXPORT(name, op, public_name, T) HWY_EXPORT(name);
ORIGAMI_REDUCE_KERNELS(ORIGAMI_EXPORT)
#undef ORIGAMI_EXPORT
HWY_EXPORT(AddBf16Bf16);
HWY_EXPORT(AddBf16F32);
HWY_EXPORT(Sum);
}  // namespace reduce_simd

#define ORIGAMI_PUBLIC(name, op, public_name, T)                    \
  void public_name(std::int64_t n, T* acc, const T* in) {             \
    if (n > 0) HWY_DYNAMIC_DISPATCH(reduce_simd::name)(n, acc, in);   \
  }
ORIGAMI_REDUCE_KERNELS(ORIGAMI_PUBLIC)
#undef ORIGAMI_PUBLIC

void add_into(std::int64_t n, bf16* acc, const bf16* in) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(reduce_simd::AddBf16Bf16)(n, bf16_bits(acc), bf16_bits(in));
}

void add_into(std::int64_t n, bf16* acc, const float* in) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(reduce_simd::AddBf16F32)(n, bf16_bits(acc), in);
}

float sum(std::int64_t n, const float* x) {
  return n > 0 ? HWY_DYNAMIC_DISPATCH(reduce_simd::Sum)(n, x) : 0.0f;
}

}  // namespace origami::kernels
#endif  // HWY_ONCE
