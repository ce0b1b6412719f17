#include "origami/kernels/swiglu.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "origami/core/error.h"
#include "simd_targets.h"
#include "test_util.h"

namespace origami::kernels {
namespace {

using testing::RelClose;
using testing::random_floats;

double sigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }
double silu(double a) { return a * sigmoid(a); }
double silu_grad(double a) {
  const double s = sigmoid(a);
  return s * (1.0 + a * (1.0 - s));
}

// The kernel tests run on every SIMD target of the machine (simd_targets.h).
class SwiGlu : public testing::OnEverySimdTarget {};

TEST_P(SwiGlu, ForwardAndBackwardMatchFloat64Reference) {
  std::mt19937 rng(21);
  for (std::int64_t n : {1, 3, 17, 33, 257, 40000}) {
    const auto a = random_floats(rng, n, -8.0f, 8.0f);
    const auto u = random_floats(rng, n, -2.0f, 2.0f);
    const auto dg = random_floats(rng, n);
    std::vector<double> g_ref(static_cast<std::size_t>(n)), da_ref(static_cast<std::size_t>(n)), du_ref(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
      g_ref[i] = silu(a[i]) * u[i];
      da_ref[i] = double(dg[i]) * u[i] * silu_grad(a[i]);
      du_ref[i] = double(dg[i]) * silu(a[i]);
    }
    std::vector<float> g(static_cast<std::size_t>(n)), da(static_cast<std::size_t>(n), 0.0f), du(static_cast<std::size_t>(n), 0.0f);
    swiglu_forward(n, a.data(), u.data(), g.data());
    swiglu_backward(n, a.data(), u.data(), dg.data(), da.data(), du.data());
    EXPECT_TRUE(RelClose(g, g_ref)) << n;
    EXPECT_TRUE(RelClose(da, da_ref)) << n;
    EXPECT_TRUE(RelClose(du, du_ref)) << n;
  }
}

TEST(SwiGluReference, ReferenceGradientMatchesFiniteDifferences) {
  std::mt19937 rng(22);
  const std::size_t n = 33;
  const auto a = testing::to_double(random_floats(rng, n, -5.0f, 5.0f));
  const auto u = testing::to_double(random_floats(rng, n));
  const auto dg = testing::to_double(random_floats(rng, n));
  auto loss = [&](const std::vector<double>& av, const std::vector<double>& uv) {
    double l = 0.0;
    for (std::size_t i = 0; i < n; ++i) l += silu(av[i]) * uv[i] * dg[i];
    return l;
  };
  std::vector<double> da(n), du(n);
  for (std::size_t i = 0; i < n; ++i) {
    da[i] = dg[i] * u[i] * silu_grad(a[i]);
    du[i] = dg[i] * silu(a[i]);
  }
  EXPECT_LE(testing::rel_l2(da, testing::numeric_gradient([&](const auto& v) { return loss(v, u); }, a)), 1e-7);
  EXPECT_LE(testing::rel_l2(du, testing::numeric_gradient([&](const auto& v) { return loss(a, v); }, u)), 1e-7);
}

TEST_P(SwiGlu, BackwardAccumulates) {
  std::mt19937 rng(23);
  const std::int64_t n = 257;
  const auto a = random_floats(rng, n, -4.0f, 4.0f), u = random_floats(rng, n), dg = random_floats(rng, n);
  std::vector<float> da_fresh(static_cast<std::size_t>(n), 0.0f), du_fresh(static_cast<std::size_t>(n), 0.0f);
  swiglu_backward(n, a.data(), u.data(), dg.data(), da_fresh.data(), du_fresh.data());
  const auto da0 = random_floats(rng, n), du0 = random_floats(rng, n);
  auto da = da0, du = du0;
  swiglu_backward(n, a.data(), u.data(), dg.data(), da.data(), du.data());
  std::vector<double> da_expect(static_cast<std::size_t>(n)), du_expect(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
    da_expect[i] = double(da0[i]) + da_fresh[i];
    du_expect[i] = double(du0[i]) + du_fresh[i];
  }
  EXPECT_TRUE(RelClose(da, da_expect, 1e-6));
  EXPECT_TRUE(RelClose(du, du_expect, 1e-6));
}

TEST_P(SwiGlu, ExtremeInputsStayFinite) {
  const std::vector<float> a = {-1000.0f, -100.0f, -88.5f, -20.0f, 0.0f, 20.0f, 88.5f, 100.0f, 1000.0f};
  const std::vector<float> u(a.size(), 1.0f), dg(a.size(), 1.0f);
  std::vector<float> g(a.size()), da(a.size(), 0.0f), du(a.size(), 0.0f);
  swiglu_forward(std::int64_t(a.size()), a.data(), u.data(), g.data());
  swiglu_backward(std::int64_t(a.size()), a.data(), u.data(), dg.data(), da.data(), du.data());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(std::isfinite(g[i]) && std::isfinite(da[i]) && std::isfinite(du[i])) << a[i];
    EXPECT_NEAR(g[i], silu(a[i]), 1e-6 * std::max(1.0, std::abs(double(a[i])))) << a[i];
    EXPECT_NEAR(da[i], silu_grad(a[i]), 1e-6) << a[i];
  }
}

TEST_P(SwiGlu, OneAndTwoThreadsAreBitwiseIdentical) {
  std::mt19937 rng(24);
  const std::int64_t n = 100003;
  const auto a = random_floats(rng, n, -6.0f, 6.0f), u = random_floats(rng, n), dg = random_floats(rng, n);
  auto run = [&](int threads) {
    testing::ThreadCountScope scope(threads);
    std::vector<float> g(static_cast<std::size_t>(n)), da(static_cast<std::size_t>(n), 0.0f), du(static_cast<std::size_t>(n), 0.0f);
    swiglu_forward(n, a.data(), u.data(), g.data());
    swiglu_backward(n, a.data(), u.data(), dg.data(), da.data(), du.data());
    g.insert(g.end(), da.begin(), da.end());
    g.insert(g.end(), du.begin(), du.end());
    return g;
  };
  EXPECT_TRUE(testing::bitwise_equal(run(1), run(2)));
}

TEST(SwiGluChecks, ZeroAndNegativeSizes) {
  swiglu_forward(0, nullptr, nullptr, nullptr);
  swiglu_backward(0, nullptr, nullptr, nullptr, nullptr, nullptr);
  EXPECT_THROW(swiglu_forward(-1, nullptr, nullptr, nullptr), Error);
}

ORIGAMI_ON_EVERY_SIMD_TARGET(SwiGlu);

}  // namespace
}  // namespace origami::kernels
