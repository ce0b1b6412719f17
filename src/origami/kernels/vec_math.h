// Small math helpers written so that GCC vectorises the loops that call them (glibc's expf
// is only vectorised under -ffast-math, which the project does not use).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace origami::kernels::detail {

// e^x in float, branch-free (Cephes expf: range reduction by ln 2, degree-6 polynomial),
// within about 2 ulp of expf for x in [-87, 88]. Below -87 it returns 0 (so e^-inf = 0),
// above 88 it saturates at e^88; NaN stays NaN.
inline float exp_approx(float x) {
  constexpr float kHi = 88.0f;
  constexpr float kLo = -87.0f;
  float xc = x > kHi ? kHi : x;
  xc = xc < kLo ? kLo : xc;
  const float n = std::floor(xc * 1.44269504088896341f + 0.5f);
  // ln 2 split in two so that r = x - n ln2 is exact enough.
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // 2^n without a float->int conversion: adding 1.5*2^23 puts n in the low mantissa bits.
  const std::uint32_t n_bits = std::bit_cast<std::uint32_t>(n + 12582912.0f) - 0x4B400000u;
  const float scale = std::bit_cast<float>((n_bits + 127u) << 23);
  return x < kLo ? 0.0f : y * scale;
}

// 1 / (1 + e^-x).
inline float sigmoid_approx(float x) { return 1.0f / (1.0f + exp_approx(-x)); }

}  // namespace origami::kernels::detail
