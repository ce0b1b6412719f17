// RMSNorm on bf16 activations (rmsnorm_forward_bf16, rmsnorm_backward_bf16) against the float64
// result of the same bf16 inputs, within one bf16 rounding (bf16_test_util.h), on every SIMD
// target; and bit for bit the fp32 kernel on the widened inputs, rounded once.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "bf16_test_util.h"
#include "origami/core/error.h"
#include "origami/kernels/rmsnorm.h"
#include "simd_targets.h"
#include "test_util.h"

namespace origami::kernels {
namespace {

using testing::RelClose;

constexpr double kEps = 1e-5;

struct Sizes {
  std::int64_t rows, h;
};
constexpr Sizes kSizes[] = {{1, 1}, {3, 17}, {17, 33}, {33, 257}, {5, 256}, {1, 3}, {7, 1001}};

// float64 forward and backward of the bf16 inputs, accumulated onto dx0 and dw0 as the kernel
// does; dx_mag is the m of each dx element (|dx0| + |r w dy| + |x| r^3 / h sum |dy w x|).
struct Reference {
  std::vector<double> y, rstd, dx, dx_mag, dw;
};
Reference reference(std::int64_t rows, std::int64_t h, const std::vector<double>& x,
                    const std::vector<double>& w, const std::vector<double>& dy,
                    const std::vector<double>& dx0, const std::vector<double>& dw0) {
  Reference r{std::vector<double>(x.size()), std::vector<double>(static_cast<std::size_t>(rows)),
              dx0, std::vector<double>(x.size()), dw0};
  for (std::int64_t i = 0; i < rows; ++i) {
    double ss = 0.0, dot = 0.0, dot_mag = 0.0;
    for (std::int64_t j = 0; j < h; ++j) {
      const auto k = static_cast<std::size_t>(i * h + j);
      ss += x[k] * x[k];
      dot += dy[k] * w[static_cast<std::size_t>(j)] * x[k];
      dot_mag += std::abs(dy[k] * w[static_cast<std::size_t>(j)] * x[k]);
    }
    const double rs = 1.0 / std::sqrt(ss / double(h) + kEps);
    r.rstd[static_cast<std::size_t>(i)] = rs;
    for (std::int64_t j = 0; j < h; ++j) {
      const auto k = static_cast<std::size_t>(i * h + j);
      const double wj = w[static_cast<std::size_t>(j)];
      r.y[k] = x[k] * rs * wj;
      const double t1 = rs * wj * dy[k], t2 = x[k] * rs * rs * rs * dot / double(h);
      r.dx[k] += t1 - t2;
      r.dx_mag[k] =
          std::abs(dx0[k]) + std::abs(t1) + std::abs(x[k]) * rs * rs * rs * dot_mag / double(h);
      r.dw[static_cast<std::size_t>(j)] += dy[k] * x[k] * rs;
    }
  }
  return r;
}

std::vector<double> abs_of(const std::vector<double>& v) {
  std::vector<double> a(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) a[i] = std::abs(v[i]);
  return a;
}

class RmsNormBf16 : public testing::OnEverySimdTarget {};

TEST_P(RmsNormBf16, ForwardAndAccumulatingBackwardMatchFloat64Reference) {
  std::mt19937 rng(111);
  for (const auto& [rows, h] : kSizes) {
    const auto x = testing::random_bf16(rng, rows * h, -2.0f, 2.0f);
    const auto w = testing::random_floats(rng, h, 0.5f, 1.5f);
    const auto dy = testing::random_bf16(rng, rows * h);
    const auto dx0 = testing::random_bf16(rng, rows * h);
    const auto dw0 = testing::random_floats(rng, h);
    const auto ref = reference(rows, h, testing::widen_to_double(x), testing::to_double(w),
                               testing::widen_to_double(dy), testing::widen_to_double(dx0),
                               testing::to_double(dw0));
    std::vector<bf16> y(x.size());
    std::vector<float> rstd(static_cast<std::size_t>(rows));
    rmsnorm_forward_bf16(rows, h, x.data(), w.data(), float(kEps), y.data(), rstd.data());
    EXPECT_TRUE(testing::WithinOneBf16Rounding(y, ref.y, abs_of(ref.y))) << rows << "x" << h;
    EXPECT_TRUE(RelClose(rstd, ref.rstd)) << rows << "x" << h;  // fp32 output: the fp32 bound
    auto dx = dx0;
    auto dw = dw0;
    rmsnorm_backward_bf16(rows, h, x.data(), w.data(), rstd.data(), dy.data(), dx.data(),
                          dw.data());
    EXPECT_TRUE(testing::WithinOneBf16Rounding(dx, ref.dx, ref.dx_mag)) << rows << "x" << h;
    EXPECT_TRUE(RelClose(dw, ref.dw)) << rows << "x" << h;
  }
}

// The bf16 kernels are the fp32 kernels on the widened inputs with one rounding at each bf16
// output: the same bits, on every target (rstd and dw, fp32 outputs, identical).
TEST_P(RmsNormBf16, EqualsTheFp32KernelRoundedOnce) {
  std::mt19937 rng(112);
  for (const auto& [rows, h] : kSizes) {
    const auto x = testing::random_bf16(rng, rows * h, -3.0f, 3.0f);
    const auto w = testing::random_floats(rng, h, 0.5f, 1.5f);
    const auto dy = testing::random_bf16(rng, rows * h), dx0 = testing::random_bf16(rng, rows * h);
    const auto dw0 = testing::random_floats(rng, h);
    std::vector<bf16> y(x.size());
    std::vector<float> rstd(static_cast<std::size_t>(rows)), rstd32(rstd.size());
    rmsnorm_forward_bf16(rows, h, x.data(), w.data(), float(kEps), y.data(), rstd.data());
    auto dx = dx0;
    auto dw = dw0;
    rmsnorm_backward_bf16(rows, h, x.data(), w.data(), rstd.data(), dy.data(), dx.data(),
                          dw.data());

    const auto x32 = testing::widen(x), dy32 = testing::widen(dy);
    std::vector<float> y32(x.size());
    rmsnorm_forward(rows, h, x32.data(), w.data(), float(kEps), y32.data(), rstd32.data());
    auto dx32 = testing::widen(dx0);
    auto dw32 = dw0;
    rmsnorm_backward(rows, h, x32.data(), w.data(), rstd32.data(), dy32.data(), dx32.data(),
                     dw32.data());
    EXPECT_TRUE(testing::bitwise_equal(y, testing::narrow(y32))) << rows << "x" << h;
    EXPECT_TRUE(testing::bitwise_equal(rstd, rstd32)) << rows << "x" << h;
    EXPECT_TRUE(testing::bitwise_equal(dx, testing::narrow(dx32))) << rows << "x" << h;
    EXPECT_TRUE(testing::bitwise_equal(dw, dw32)) << rows << "x" << h;
  }
}

TEST_P(RmsNormBf16, OneAndTwoThreadsAreBitwiseIdentical) {
  std::mt19937 rng(113);
  const std::int64_t rows = 257, h = 200;  // several row chunks and column blocks
  const auto x = testing::random_bf16(rng, rows * h), dy = testing::random_bf16(rng, rows * h);
  const auto w = testing::random_floats(rng, h);
  auto run = [&](int threads) {
    testing::ThreadCountScope scope(threads);
    std::vector<bf16> y(x.size()), dx(x.size());
    std::vector<float> rstd(static_cast<std::size_t>(rows)), dw(static_cast<std::size_t>(h), 0.0f);
    rmsnorm_forward_bf16(rows, h, x.data(), w.data(), float(kEps), y.data(), rstd.data());
    rmsnorm_backward_bf16(rows, h, x.data(), w.data(), rstd.data(), dy.data(), dx.data(),
                          dw.data());
    std::vector<float> all = testing::widen(y);
    const auto dxf = testing::widen(dx);
    all.insert(all.end(), dxf.begin(), dxf.end());
    all.insert(all.end(), rstd.begin(), rstd.end());
    all.insert(all.end(), dw.begin(), dw.end());
    return all;
  };
  EXPECT_TRUE(testing::bitwise_equal(run(1), run(2)));
}

TEST(RmsNormBf16Checks, ZeroRowsAndBadSizes) {
  std::vector<float> w(4, 1.0f), dw(4, 5.0f);
  rmsnorm_forward_bf16(0, 4, nullptr, w.data(), 1e-5f, nullptr, nullptr);
  rmsnorm_backward_bf16(0, 4, nullptr, w.data(), nullptr, nullptr, nullptr, dw.data());
  for (float v : dw) EXPECT_EQ(v, 5.0f);
  bf16 x = to_bf16(1.0f), y;
  float r = 0.0f;
  EXPECT_THROW(rmsnorm_forward_bf16(1, 0, &x, w.data(), 1e-5f, &y, &r), Error);
  EXPECT_THROW(rmsnorm_forward_bf16(-1, 4, &x, w.data(), 1e-5f, &y, &r), Error);
  EXPECT_THROW(rmsnorm_forward_bf16(1, 1, &x, w.data(), -1.0f, &y, &r), Error);
  EXPECT_THROW(rmsnorm_backward_bf16(1, 0, &x, w.data(), &r, &x, &y, dw.data()), Error);
}

ORIGAMI_ON_EVERY_SIMD_TARGET(RmsNormBf16);

}  // namespace
}  // namespace origami::kernels
