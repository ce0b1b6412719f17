// The vector helpers of the element-wise kernels (vec_math-inl.h) on every SIMD target of the
// machine: e^x keeps its stated accuracy over [-87, 88], gives 0 below, saturates above and
// keeps NaN; the sigmoid's edges; partial loads and stores touch nothing past their count; the
// row sum equals a float64 sum for every length around its unrolling.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/vec_math_test.cpp"  // tests/ is on the include path
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "origami/kernels/vec_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace origami::kernels::vec::HWY_NAMESPACE {

// f applied lane by lane: the lanes of one vector hold x and then x's neighbours below.
template <class F>
float first_lane(F f, float x) {
  std::vector<float> in(kFloatLanes, x), out(kFloatLanes);
  hn::StoreU(f(hn::LoadU(DF(), in.data())), DF(), out.data());
  return out[0];
}

void CheckExpAccuracy(double* worst_out) {
  std::vector<float> x(kFloatLanes), y(kFloatLanes);
  double worst = 0.0;
  for (int i = 0; i <= 1'000'000; i += static_cast<int>(kFloatLanes)) {
    for (std::int64_t l = 0; l < kFloatLanes; ++l)
      x[l] = -87.0f + 175.0f * static_cast<float>(std::min<std::int64_t>(i + l, 1'000'000)) /
                          1'000'000.0f;
    hn::StoreU(Exp(hn::LoadU(DF(), x.data())), DF(), y.data());
    for (std::int64_t l = 0; l < kFloatLanes; ++l) {
      const double exact = std::exp(static_cast<double>(x[l]));
      worst = std::max(worst, std::abs(y[l] - exact) / exact);
    }
  }
  *worst_out = worst;
  EXPECT_EQ(first_lane(Exp, 0.0f), 1.0f);
}

void CheckExpEdges() {
  constexpr float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(first_lane(Exp, -inf), 0.0f);
  EXPECT_EQ(first_lane(Exp, -1000.0f), 0.0f);
  EXPECT_EQ(first_lane(Exp, -87.5f), 0.0f);  // flushed below -87 (e^-87.5 ~ 1e-38)
  EXPECT_TRUE(std::isfinite(first_lane(Exp, inf)));
  EXPECT_NEAR(first_lane(Exp, inf) / std::exp(88.0), 1.0, 1e-6);  // saturates at e^88
  EXPECT_TRUE(std::isnan(first_lane(Exp, std::numeric_limits<float>::quiet_NaN())));
  EXPECT_LE(first_lane(Sigmoid, -inf), 1e-38f);  // 1 / (1 + e^88): the saturation shows here
  EXPECT_GE(first_lane(Sigmoid, -inf), 0.0f);
  EXPECT_EQ(first_lane(Sigmoid, inf), 1.0f);
  EXPECT_EQ(first_lane(Sigmoid, 0.0f), 0.5f);
  EXPECT_TRUE(std::isnan(first_lane(Sigmoid, std::numeric_limits<float>::quiet_NaN())));
}

void CheckPartsAndSums() {
  const DF d;
  for (std::int64_t n = 0; n <= 9 * kFloatLanes + 3; ++n) {
    // A guard element after n that no store may touch.
    std::vector<float> x(static_cast<std::size_t>(n) + 1), y(static_cast<std::size_t>(n) + 1, 7.0f);
    std::iota(x.begin(), x.end(), 1.0f);
    ForEachVector(n, [&](std::int64_t i, std::int64_t count) {
      Store(hn::Mul(Load(x.data() + i, count), hn::Set(d, 2.0f)), y.data() + i, count);
    });
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 2.0f * x[i]) << n << " " << i;
    ASSERT_EQ(y[n], 7.0f) << "store past the end, n = " << n;
    // 1 + x_i: the lanes past n of the partial vector hold 1, which must not be added.
    const float sum = SumOver(n, [&](std::int64_t i, std::int64_t count) {
      return hn::Add(Load(x.data() + i, count), hn::Set(d, 1.0f));
    });
    EXPECT_EQ(sum, static_cast<float>(n * (n + 1) / 2 + n)) << n;  // small integers: exact
  }
}

}  // namespace origami::kernels::vec::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "simd_targets.h"

namespace origami::kernels::vec {
HWY_EXPORT(CheckExpAccuracy);
HWY_EXPORT(CheckExpEdges);
HWY_EXPORT(CheckPartsAndSums);

class VecMath : public testing::OnEverySimdTarget {};

TEST_P(VecMath, ExpWithinAFewUlpOverTheWholeRange) {
  double worst = 1.0;
  HWY_DYNAMIC_DISPATCH(CheckExpAccuracy)(&worst);
  // float epsilon is 1.19e-7; a few ulp at most (8.3e-8 measured on every target).
  EXPECT_LE(worst, 2e-7);
  RecordProperty("worst_relative_error", fmt::format("{:.3g}", worst));
}

TEST_P(VecMath, ExpEdgesAreZeroSaturatedOrNaN) { HWY_DYNAMIC_DISPATCH(CheckExpEdges)(); }

TEST_P(VecMath, PartialVectorsAndRowSums) { HWY_DYNAMIC_DISPATCH(CheckPartsAndSums)(); }

ORIGAMI_ON_EVERY_SIMD_TARGET(VecMath);
}  // namespace origami::kernels::vec
#endif  // HWY_ONCE
