// Helpers for the tests of the bf16 kernels: random bf16 inputs, widening, and the per-element
// bound a bf16 output is held to against the float64 result of the same bf16 inputs.
//
// The bound: a kernel computes e (the exact value of its formula on the widened bf16 inputs) in
// fp32, getting f with |f - e| <= kFp32Rel * m, where m is the sum of the magnitudes of the
// terms that make up e (so a result that cancels is not held to a relative bound it cannot
// meet); then rounds f once to the nearest bf16 o, |o - f| <= 2^-8 |f| (half a bf16 ulp:
// bf16 has 8 significant bits). Hence, per element,
//     |o - e| <= 2^-8 |e| + (1 + 2^-8) kFp32Rel m,
// with kFp32Rel = 1e-5, the project's fp32 bound (kRelTol), which the sums of fp32 products
// over a row and e^x (8.3e-8) stay far inside.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "origami/core/bf16.h"
#include "test_util.h"

namespace origami::kernels::testing {

inline constexpr double kBf16Rel = 1.0 / 256.0;  // 2^-8: one rounding to bf16
inline constexpr double kFp32Rel = kRelTol;

inline std::vector<bf16> random_bf16(std::mt19937& rng, std::int64_t n, float lo = -1.0f,
                                     float hi = 1.0f) {
  std::vector<bf16> v;
  v.reserve(static_cast<std::size_t>(n));
  for (float x : random_floats(rng, n, lo, hi)) v.push_back(to_bf16(x));
  return v;
}

inline std::vector<float> widen(const std::vector<bf16>& v) {
  std::vector<float> out;
  out.reserve(v.size());
  for (bf16 b : v) out.push_back(to_float(b));
  return out;
}

inline std::vector<bf16> narrow(const std::vector<float>& v) {
  std::vector<bf16> out;
  out.reserve(v.size());
  for (float f : v) out.push_back(to_bf16(f));
  return out;
}

inline std::vector<double> widen_to_double(const std::vector<bf16>& v) {
  const std::vector<float> f = widen(v);
  return {f.begin(), f.end()};
}

// Every element of `got` within the bound above of `exact`, with `magnitude` the m of each.
inline ::testing::AssertionResult WithinOneBf16Rounding(const std::vector<bf16>& got,
                                                        const std::vector<double>& exact,
                                                        const std::vector<double>& magnitude) {
  if (got.size() != exact.size() || got.size() != magnitude.size())
    return ::testing::AssertionFailure() << "sizes differ";
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double o = to_float(got[i]);
    const double bound = kBf16Rel * std::abs(exact[i]) + (1.0 + kBf16Rel) * kFp32Rel * magnitude[i];
    if (!std::isfinite(o) || std::abs(o - exact[i]) > bound)
      return ::testing::AssertionFailure() << "element " << i << ": " << o << " vs exact "
                                           << exact[i] << " (bound " << bound << ")";
  }
  return ::testing::AssertionSuccess();
}

inline bool bitwise_equal(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  return a == b;
}

}  // namespace origami::kernels::testing
