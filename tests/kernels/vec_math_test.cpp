#include "origami/kernels/vec_math.h"

#include <cmath>
#include <limits>
#include <fmt/format.h>

#include <gtest/gtest.h>

namespace origami::kernels::detail {
namespace {

TEST(ExpApprox, WithinAFewUlpOverTheWholeRange) {
  double worst = 0.0;
  for (int i = 0; i <= 1'000'000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 1'000'000.0f;
    const double exact = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(exp_approx(x) - exact) / exact);
  }
  // float epsilon is 1.19e-7; a few ulp at most.
  EXPECT_LE(worst, 2e-7);
  RecordProperty("worst_relative_error", fmt::format("{:.3g}", worst));
  EXPECT_EQ(exp_approx(0.0f), 1.0f);
}

TEST(ExpApprox, EdgesAreZeroSaturatedOrNaN) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp_approx(-inf), 0.0f);
  EXPECT_EQ(exp_approx(-1000.0f), 0.0f);
  EXPECT_EQ(exp_approx(-87.5f), 0.0f);  // flushed below -87 (e^-87.5 ~ 1e-38)
  EXPECT_TRUE(std::isfinite(exp_approx(inf)));
  EXPECT_NEAR(exp_approx(inf) / std::exp(88.0), 1.0, 1e-6);  // saturates at e^88
  EXPECT_TRUE(std::isnan(exp_approx(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_LE(sigmoid_approx(-inf), 1e-38f);  // 1 / (1 + e^88): the saturation shows here
  EXPECT_GE(sigmoid_approx(-inf), 0.0f);
  EXPECT_EQ(sigmoid_approx(inf), 1.0f);
  EXPECT_EQ(sigmoid_approx(0.0f), 0.5f);
}

}  // namespace
}  // namespace origami::kernels::detail
