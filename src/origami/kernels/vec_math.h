// Small math helpers written so that GCC vectorises the loops that call them (glibc's expf
// is only vectorised under -ffast-math, which the project does not use).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace origami::kernels::detail {

// e^x in float, branch-free (Cephes expf: range reduction by ln 2, degree-6 polynomial),
// within a few ulp of expf for x in [-87, 88]. Below -87 it returns 0 (so e^-inf = 0), above
// 88 it saturates at about e^88; NaN stays NaN.
//
// Written for the vectoriser: clamping with std::min/max (not a branch that GCC folds into
// masked multiplies it cannot vectorise), rounding by the 1.5*2^23 trick rather than floor
// (not vectorised under -ftrapping-math), and 2^n built from the same bits without a
// float->int conversion.
inline float exp_approx(float x) {
  constexpr float kHi = 88.0f;
  constexpr float kLo = -87.0f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float xc = std::min(std::max(x, kLo), kHi);
  const float t = xc * 1.44269504088896341f + kRound;
  const float n = t - kRound;  // round(x / ln 2), in [-126, 127]
  // ln 2 split in two so that r = x - n ln 2 keeps its precision.
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // The low mantissa bits of t hold n (two's complement): the exponent field of 2^n is n + 127.
  const std::uint32_t n_bits = std::bit_cast<std::uint32_t>(t) - 0x4B400000u;
  const float scale = std::bit_cast<float>((n_bits + 127u) << 23);
  // Flush below kLo by a 0/1 factor, not a branch on the result (same vectoriser reason).
  // NaN * 0 stays NaN.
  const float keep = x < kLo ? 0.0f : 1.0f;
  return y * scale * keep;
}

// 1 / (1 + e^-x).
inline float sigmoid_approx(float x) { return 1.0f / (1.0f + exp_approx(-x)); }

}  // namespace origami::kernels::detail
