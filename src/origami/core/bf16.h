// bfloat16: the upper 16 bits of an IEEE-754 binary32 (1 sign, 8 exponent, 7 mantissa bits), so
// it has fp32's range with 8 bits of precision (unit roundoff 2^-8). Conversion from fp32 rounds
// to nearest, ties to even — deterministic, no stochastic rounding — and keeps NaN a (quiet)
// NaN of the same sign; overflow rounds to infinity as IEEE rounding does. Conversion to fp32
// is exact. These scalar forms are the reference that the vector conversions of
// kernels/convert.h are tested against.
#pragma once

#include <bit>
#include <cstdint>

namespace origami {

struct bf16 {
  std::uint16_t bits = 0;
  friend bool operator==(bf16 a, bf16 b) = default;
};
static_assert(sizeof(bf16) == 2);

inline bf16 to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  // A NaN's payload may sit entirely in the low 16 bits: set the quiet bit so it stays NaN.
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<std::uint16_t>((u >> 16) | 0x40u)};
  const std::uint32_t round_to_even = 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<std::uint16_t>((u + round_to_even) >> 16)};
}

inline float to_float(bf16 b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b.bits) << 16);
}

// The fp32 value that a round trip through bf16 gives (what a bf16 tensor holds).
inline float round_to_bf16(float f) { return to_float(to_bf16(f)); }

}  // namespace origami
