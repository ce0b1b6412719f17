// SwiGLU on bf16 arrays (swiglu_forward_bf16, swiglu_backward_bf16) against the float64 result
// of the same bf16 inputs, within one bf16 rounding (bf16_test_util.h), on every SIMD target;
// and bit for bit the fp32 kernel on the widened inputs, rounded once.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "bf16_test_util.h"
#include "origami/core/error.h"
#include "origami/kernels/swiglu.h"
#include "simd_targets.h"
#include "test_util.h"

namespace origami::kernels {
namespace {

constexpr std::int64_t kSizes[] = {1, 3, 17, 31, 257, 1000, 16385};

class SwiGluBf16 : public testing::OnEverySimdTarget {};

TEST_P(SwiGluBf16, ForwardAndAccumulatingBackwardMatchFloat64Reference) {
  std::mt19937 rng(121);
  for (const std::int64_t n : kSizes) {
    const auto a = testing::random_bf16(rng, n, -8.0f, 8.0f), u = testing::random_bf16(rng, n);
    const auto dg = testing::random_bf16(rng, n);
    const auto da0 = testing::random_bf16(rng, n), du0 = testing::random_bf16(rng, n);
    const auto size = static_cast<std::size_t>(n);
    std::vector<double> g_ref(size), g_mag(size), da_ref(size), da_mag(size), du_ref(size),
        du_mag(size);
    for (std::size_t i = 0; i < size; ++i) {
      const double ai = to_float(a[i]), ui = to_float(u[i]), dgi = to_float(dg[i]);
      const double s = 1.0 / (1.0 + std::exp(-ai));
      g_ref[i] = ai * s * ui;
      g_mag[i] = std::abs(g_ref[i]);
      // silu'(a) = s (1 + a (1 - s)): its inner sum may cancel, so m takes its terms' sizes.
      da_ref[i] = to_float(da0[i]) + dgi * ui * s * (1.0 + ai * (1.0 - s));
      da_mag[i] =
          std::abs(to_float(da0[i])) + std::abs(dgi * ui) * s * (1.0 + std::abs(ai) * (1.0 - s));
      du_ref[i] = to_float(du0[i]) + dgi * ai * s;
      du_mag[i] = std::abs(to_float(du0[i])) + std::abs(dgi * ai * s);
    }
    std::vector<bf16> g(size);
    swiglu_forward_bf16(n, a.data(), u.data(), g.data());
    EXPECT_TRUE(testing::WithinOneBf16Rounding(g, g_ref, g_mag)) << n;
    auto da = da0, du = du0;
    swiglu_backward_bf16(n, a.data(), u.data(), dg.data(), da.data(), du.data());
    EXPECT_TRUE(testing::WithinOneBf16Rounding(da, da_ref, da_mag)) << n;
    EXPECT_TRUE(testing::WithinOneBf16Rounding(du, du_ref, du_mag)) << n;
  }
}

TEST_P(SwiGluBf16, EqualsTheFp32KernelRoundedOnce) {
  std::mt19937 rng(122);
  for (const std::int64_t n : kSizes) {
    const auto a = testing::random_bf16(rng, n, -8.0f, 8.0f), u = testing::random_bf16(rng, n);
    const auto dg = testing::random_bf16(rng, n);
    const auto da0 = testing::random_bf16(rng, n), du0 = testing::random_bf16(rng, n);
    std::vector<bf16> g(a.size());
    auto da = da0, du = du0;
    swiglu_forward_bf16(n, a.data(), u.data(), g.data());
    swiglu_backward_bf16(n, a.data(), u.data(), dg.data(), da.data(), du.data());
    const auto a32 = testing::widen(a), u32 = testing::widen(u), dg32 = testing::widen(dg);
    std::vector<float> g32(a.size());
    auto da32 = testing::widen(da0), du32 = testing::widen(du0);
    swiglu_forward(n, a32.data(), u32.data(), g32.data());
    swiglu_backward(n, a32.data(), u32.data(), dg32.data(), da32.data(), du32.data());
    EXPECT_TRUE(testing::bitwise_equal(g, testing::narrow(g32))) << n;
    EXPECT_TRUE(testing::bitwise_equal(da, testing::narrow(da32))) << n;
    EXPECT_TRUE(testing::bitwise_equal(du, testing::narrow(du32))) << n;
  }
}

// Large |a| stays finite (e^x saturates, as in fp32) and a NaN comes through as a NaN.
TEST_P(SwiGluBf16, ExtremeInputsStayFiniteAndNaNComesThrough) {
  const std::vector<float> a32 = {-1000.0f, -100.0f, -88.5f, -20.0f, 0.0f,
                                  20.0f,    88.5f,   100.0f, 1000.0f};
  const auto a = testing::narrow(a32);
  const std::vector<bf16> ones(a.size(), to_bf16(1.0f));
  std::vector<bf16> g(a.size()), da(a.size()), du(a.size());
  swiglu_forward_bf16(std::int64_t(a.size()), a.data(), ones.data(), g.data());
  swiglu_backward_bf16(std::int64_t(a.size()), a.data(), ones.data(), ones.data(), da.data(),
                       du.data());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(std::isfinite(to_float(g[i])) && std::isfinite(to_float(da[i])) &&
                std::isfinite(to_float(du[i])))
        << to_float(a[i]);
  }
  const std::vector<bf16> nan = {to_bf16(std::nanf("")), to_bf16(1.0f), to_bf16(-std::nanf(""))};
  std::vector<bf16> gn(nan.size()), dan(nan.size()), dun(nan.size());
  swiglu_forward_bf16(3, nan.data(), ones.data(), gn.data());
  swiglu_backward_bf16(3, nan.data(), ones.data(), ones.data(), dan.data(), dun.data());
  EXPECT_TRUE(std::isnan(to_float(gn[0])) && std::isnan(to_float(gn[2])));
  EXPECT_TRUE(std::isnan(to_float(dan[0])) && std::isnan(to_float(dun[2])));
  EXPECT_FALSE(std::isnan(to_float(gn[1])));
}

TEST_P(SwiGluBf16, OneAndTwoThreadsAreBitwiseIdentical) {
  std::mt19937 rng(123);
  const std::int64_t n = 100003;
  const auto a = testing::random_bf16(rng, n, -6.0f, 6.0f), u = testing::random_bf16(rng, n);
  const auto dg = testing::random_bf16(rng, n);
  auto run = [&](int threads) {
    testing::ThreadCountScope scope(threads);
    std::vector<bf16> g(a.size()), da(a.size()), du(a.size());
    swiglu_forward_bf16(n, a.data(), u.data(), g.data());
    swiglu_backward_bf16(n, a.data(), u.data(), dg.data(), da.data(), du.data());
    g.insert(g.end(), da.begin(), da.end());
    g.insert(g.end(), du.begin(), du.end());
    return g;
  };
  EXPECT_TRUE(testing::bitwise_equal(run(1), run(2)));
}

TEST(SwiGluBf16Checks, ZeroAndNegativeSizes) {
  swiglu_forward_bf16(0, nullptr, nullptr, nullptr);
  swiglu_backward_bf16(0, nullptr, nullptr, nullptr, nullptr, nullptr);
  EXPECT_THROW(swiglu_forward_bf16(-1, nullptr, nullptr, nullptr), Error);
  EXPECT_THROW(swiglu_backward_bf16(-1, nullptr, nullptr, nullptr, nullptr, nullptr), Error);
}

ORIGAMI_ON_EVERY_SIMD_TARGET(SwiGluBf16);

}  // namespace
}  // namespace origami::kernels
