#include "origami/kernels/rmsnorm.h"

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

constexpr double kEps = 1e-5;

struct RmsRef {
  std::vector<double> y, rstd, dx, dw;
};

// float64 reference: forward, and the analytic backward for the upstream gradient dy.
RmsRef rmsnorm_reference(std::int64_t rows, std::int64_t h, const std::vector<double>& x,
                         const std::vector<double>& w, const std::vector<double>& dy) {
  RmsRef r{std::vector<double>(x.size()), std::vector<double>(static_cast<std::size_t>(rows)),
           std::vector<double>(x.size()), std::vector<double>(static_cast<std::size_t>(h))};
  for (std::int64_t i = 0; i < rows; ++i) {
    double ss = 0.0, dot = 0.0;
    for (std::int64_t j = 0; j < h; ++j) {
      const std::size_t k = static_cast<std::size_t>(i * h + j);
      ss += x[k] * x[k];
      dot += dy[k] * w[static_cast<std::size_t>(j)] * x[k];
    }
    const double rs = 1.0 / std::sqrt(ss / double(h) + kEps);
    r.rstd[static_cast<std::size_t>(i)] = rs;
    for (std::int64_t j = 0; j < h; ++j) {
      const std::size_t k = static_cast<std::size_t>(i * h + j);
      r.y[k] = x[k] * rs * w[static_cast<std::size_t>(j)];
      r.dx[k] = rs * w[static_cast<std::size_t>(j)] * dy[k] - x[k] * rs * rs * rs * dot / double(h);
      r.dw[static_cast<std::size_t>(j)] += dy[k] * x[k] * rs;
    }
  }
  return r;
}

// The kernel tests run on every SIMD target of the machine (simd_targets.h).
class RmsNorm : public testing::OnEverySimdTarget {};

TEST_P(RmsNorm, ForwardAndBackwardMatchFloat64Reference) {
  std::mt19937 rng(11);
  for (const auto& [rows, h] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {3, 17}, {17, 33},
                               {33, 257}, {5, 256}, {1, 3}}) {
    const auto x = random_floats(rng, rows * h, -2.0f, 2.0f);
    const auto w = random_floats(rng, h, 0.5f, 1.5f);
    const auto dy = random_floats(rng, rows * h);
    const auto ref = rmsnorm_reference(rows, h, testing::to_double(x), testing::to_double(w),
                                       testing::to_double(dy));
    std::vector<float> y(x.size()), rstd(static_cast<std::size_t>(rows));
    rmsnorm_forward(rows, h, x.data(), w.data(), float(kEps), y.data(), rstd.data());
    EXPECT_TRUE(RelClose(y, ref.y)) << rows << "x" << h;
    EXPECT_TRUE(RelClose(rstd, ref.rstd)) << rows << "x" << h;
    std::vector<float> dx(x.size(), 0.0f), dw(static_cast<std::size_t>(h), 0.0f);
    rmsnorm_backward(rows, h, x.data(), w.data(), rstd.data(), dy.data(), dx.data(), dw.data());
    if (h > 1) {
      EXPECT_TRUE(RelClose(dx, ref.dx)) << rows << "x" << h;
    } else {
      // h = 1: the two terms of dx cancel to a value of order eps (dx = w dy r eps/(x^2+eps)),
      // so bound the error by the size of the terms instead: ||dx - ref|| <= 1e-5 ||r w dy||.
      double err = 0.0, term = 0.0;
      for (std::int64_t i = 0; i < rows; ++i) {
        const auto k = static_cast<std::size_t>(i);
        err += (dx[k] - ref.dx[k]) * (dx[k] - ref.dx[k]);
        term += std::pow(ref.rstd[k] * w[0] * dy[k], 2);
      }
      EXPECT_LE(std::sqrt(err / term), testing::kRelTol);
    }
    EXPECT_TRUE(RelClose(dw, ref.dw)) << rows << "x" << h;
  }
}

TEST(RmsNormReference, ReferenceGradientMatchesFiniteDifferences) {
  std::mt19937 rng(12);
  const std::int64_t rows = 3, h = 17;
  const auto x = testing::to_double(random_floats(rng, rows * h, -2.0f, 2.0f));
  const auto w = testing::to_double(random_floats(rng, h, 0.5f, 1.5f));
  const auto dy = testing::to_double(random_floats(rng, rows * h));
  const auto ref = rmsnorm_reference(rows, h, x, w, dy);
  // L = sum(y * dy): its gradient is the backward of dy.
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& wv) {
    const auto y = rmsnorm_reference(rows, h, xv, wv, dy).y;
    double l = 0.0;
    for (std::size_t k = 0; k < y.size(); ++k) l += y[k] * dy[k];
    return l;
  };
  const auto gx = testing::numeric_gradient([&](const std::vector<double>& v) { return loss(v, w); }, x);
  const auto gw = testing::numeric_gradient([&](const std::vector<double>& v) { return loss(x, v); }, w);
  EXPECT_LE(testing::rel_l2(ref.dx, gx), 1e-7);
  EXPECT_LE(testing::rel_l2(ref.dw, gw), 1e-7);
}

TEST_P(RmsNorm, BackwardAccumulatesIntoExistingGradients) {
  std::mt19937 rng(13);
  const std::int64_t rows = 17, h = 33;
  const auto x = random_floats(rng, rows * h), w = random_floats(rng, h), dy = random_floats(rng, rows * h);
  std::vector<float> y(x.size()), rstd(static_cast<std::size_t>(rows));
  rmsnorm_forward(rows, h, x.data(), w.data(), float(kEps), y.data(), rstd.data());
  std::vector<float> dx_fresh(x.size(), 0.0f), dw_fresh(static_cast<std::size_t>(h), 0.0f);
  rmsnorm_backward(rows, h, x.data(), w.data(), rstd.data(), dy.data(), dx_fresh.data(), dw_fresh.data());
  const auto dx0 = random_floats(rng, rows * h), dw0 = random_floats(rng, h);
  auto dx = dx0, dw = dw0;
  rmsnorm_backward(rows, h, x.data(), w.data(), rstd.data(), dy.data(), dx.data(), dw.data());
  std::vector<double> dx_expect(dx.size()), dw_expect(dw.size());
  for (std::size_t k = 0; k < dx.size(); ++k) dx_expect[k] = double(dx0[k]) + dx_fresh[k];
  for (std::size_t k = 0; k < dw.size(); ++k) dw_expect[k] = double(dw0[k]) + dw_fresh[k];
  EXPECT_TRUE(RelClose(dx, dx_expect, 1e-6));
  EXPECT_TRUE(RelClose(dw, dw_expect, 1e-6));
}

TEST_P(RmsNorm, OneAndTwoThreadsAreBitwiseIdentical) {
  std::mt19937 rng(14);
  const std::int64_t rows = 257, h = 200;  // several row chunks and column blocks
  const auto x = random_floats(rng, rows * h), w = random_floats(rng, h), dy = random_floats(rng, rows * h);
  auto run = [&](int threads) {
    testing::ThreadCountScope scope(threads);
    std::vector<float> y(x.size()), rstd(static_cast<std::size_t>(rows)), dx(x.size(), 0.0f), dw(static_cast<std::size_t>(h), 0.0f);
    rmsnorm_forward(rows, h, x.data(), w.data(), float(kEps), y.data(), rstd.data());
    rmsnorm_backward(rows, h, x.data(), w.data(), rstd.data(), dy.data(), dx.data(), dw.data());
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), dw.begin(), dw.end());
    return y;
  };
  EXPECT_TRUE(testing::bitwise_equal(run(1), run(2)));
}

TEST(RmsNormChecks, ZeroRowsAndBadSizes) {
  std::vector<float> w(4, 1.0f), dw(4, 5.0f);
  rmsnorm_forward(0, 4, nullptr, w.data(), 1e-5f, nullptr, nullptr);
  rmsnorm_backward(0, 4, nullptr, w.data(), nullptr, nullptr, nullptr, dw.data());
  for (float v : dw) EXPECT_EQ(v, 5.0f);
  float x = 1.0f, y = 0.0f, r = 0.0f;
  EXPECT_THROW(rmsnorm_forward(1, 0, &x, w.data(), 1e-5f, &y, &r), Error);
  EXPECT_THROW(rmsnorm_forward(-1, 4, &x, w.data(), 1e-5f, &y, &r), Error);
}

ORIGAMI_ON_EVERY_SIMD_TARGET(RmsNorm);

}  // namespace
}  // namespace origami::kernels
