// linear_forward_skinny (the decode step's products) against a float64 reference, on every SIMD
// target of this machine, at odd sizes (partial vectors, W rows not a multiple of the tile).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "bf16_test_util.h"
#include "origami/core/error.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/gemv.h"
#include "simd_targets.h"
#include "test_util.h"

namespace origami::kernels {
namespace {

using testing::OnEverySimdTarget;
using testing::random_floats;

class Gemv : public OnEverySimdTarget {};

// y = (y0 if accumulating) + x W^T in float64, and the bound each fp32 element must meet: a dot
// of n products summed in float has |error| <= gamma_n * sum |x_k w_k| (gamma_n = n u / (1 - n
// u), u = 2^-24; the fused multiply-add only lowers it), plus one rounding of the final add.
struct Reference {
  std::vector<double> y, bound;
};
Reference reference(std::int64_t rows, std::int64_t in, std::int64_t out,
                    const std::vector<float>& x, const std::vector<float>& W,
                    const std::vector<float>* y0) {
  const double u = std::ldexp(1.0, -24);
  const double gamma = static_cast<double>(in + 1) * u / (1.0 - static_cast<double>(in + 1) * u);
  Reference r{std::vector<double>(static_cast<std::size_t>(rows * out)),
              std::vector<double>(static_cast<std::size_t>(rows * out))};
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < out; ++j) {
      double s = 0.0, a = 0.0;
      for (std::int64_t k = 0; k < in; ++k) {
        const double p = static_cast<double>(x[static_cast<std::size_t>(i * in + k)]) *
                         static_cast<double>(W[static_cast<std::size_t>(j * in + k)]);
        s += p;
        a += std::abs(p);
      }
      const auto at = static_cast<std::size_t>(i * out + j);
      const double base = y0 != nullptr ? static_cast<double>((*y0)[at]) : 0.0;
      r.y[at] = base + s;
      r.bound[at] = gamma * (a + std::abs(base)) + u * std::abs(base + s);
    }
  return r;
}

::testing::AssertionResult WithinBounds(const std::vector<float>& y, const Reference& ref) {
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double e = std::abs(static_cast<double>(y[i]) - ref.y[i]);
    if (!(e <= ref.bound[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << y[i] << " vs " << ref.y[i]
                                           << ", error " << e << " > bound " << ref.bound[i];
  }
  return testing::RelClose(y, ref.y);
}

TEST_P(Gemv, MatchesFloat64ReferenceAtOddSizes) {
  std::mt19937 rng(15);
  // in: below one vector, not a multiple of any vector width, the model's 1024 and 2816;
  // out: below the tile's 4 W rows, 4k + 3, larger than one thread's block.
  const std::int64_t ins[] = {1, 7, 33, 257, 1024, 2816};
  const std::int64_t outs[] = {1, 3, 67, 1031};
  for (std::int64_t rows : {1, 2, 3, 5, 8, 16})
    for (std::int64_t in : ins)
      for (std::int64_t out : outs) {
        if (in * out > 300000 && rows > 3) continue;  // the float64 reference's time
        const auto x = random_floats(rng, rows * in);
        const auto W = random_floats(rng, out * in);
        std::vector<float> y(static_cast<std::size_t>(rows * out), std::nanf(""));
        linear_forward_skinny(rows, in, out, x.data(), W.data(), y.data());
        EXPECT_TRUE(WithinBounds(y, reference(rows, in, out, x, W, nullptr)))
            << "rows=" << rows << " in=" << in << " out=" << out;
      }
}

TEST_P(Gemv, AccumulatesIntoY) {
  std::mt19937 rng(16);
  const std::int64_t rows = 3, in = 45, out = 29;
  const auto x = random_floats(rng, rows * in);
  const auto W = random_floats(rng, out * in);
  const auto y0 = random_floats(rng, rows * out, -4.0f, 4.0f);
  std::vector<float> y = y0;
  linear_forward_skinny(rows, in, out, x.data(), W.data(), y.data(), /*accumulate=*/true);
  EXPECT_TRUE(WithinBounds(y, reference(rows, in, out, x, W, &y0)));
}

TEST_P(Gemv, AgreesWithLinearForward) {
  std::mt19937 rng(17);
  const std::int64_t rows = 4, in = 1000, out = 515;
  const auto x = random_floats(rng, rows * in);
  const auto W = random_floats(rng, out * in);
  std::vector<float> skinny(static_cast<std::size_t>(rows * out)), gemm_y(skinny.size());
  linear_forward_skinny(rows, in, out, x.data(), W.data(), skinny.data());
  linear_forward(rows, in, out, x.data(), W.data(), gemm_y.data());
  EXPECT_TRUE(testing::RelClose(skinny, gemm_y, 1e-6));
}

// Row r's result does not depend on the other rows (a batch gives each sequence what it gets
// alone: greedy decode of a batch matches decoding each prompt by itself), nor on the threads,
// with fp32 and with bf16 weights (a batch of 7 takes the bf16 kernel's widened-copy path).
TEST_P(Gemv, BitwiseIndependentOfBatchAndThreads) {
  std::mt19937 rng(18);
  const std::int64_t rows = 7, in = 301, out = 263;
  const auto x = random_floats(rng, rows * in);
  const auto W = random_floats(rng, out * in);
  const std::vector<bf16> W16 = testing::random_bf16(rng, out * in);
  const auto product = [&](bool bf16_weights, std::int64_t n, const float* xr, float* y) {
    if (bf16_weights)
      linear_forward_skinny_bf16(n, in, out, xr, W16.data(), y);
    else
      linear_forward_skinny(n, in, out, xr, W.data(), y);
  };
  for (bool bf16_weights : {false, true}) {
    std::vector<float> batch(static_cast<std::size_t>(rows * out));
    {
      testing::ThreadCountScope two(2);
      product(bf16_weights, rows, x.data(), batch.data());
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      std::vector<float> one(static_cast<std::size_t>(out));
      product(bf16_weights, 1, x.data() + r * in, one.data());
      for (std::int64_t j = 0; j < out; ++j)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(one[static_cast<std::size_t>(j)]),
                  std::bit_cast<std::uint32_t>(batch[static_cast<std::size_t>(r * out + j)]))
            << (bf16_weights ? "bf16" : "fp32") << " row " << r << " column " << j;
    }
  }
}

// bf16 weights: widened exactly, so the reference is the float64 product of x with the bf16
// values of W and the bound is the fp32 one above (no bf16 term: the output stays fp32); and
// the result is bitwise the fp32 kernel's on those values (the same body, the same order).
TEST_P(Gemv, Bf16WeightsMatchFloat64ReferenceAndTheFp32KernelBitwise) {
  std::mt19937 rng(19);
  for (std::int64_t rows : {1, 3, 5, 16})
    for (std::int64_t in : {1, 7, 33, 257, 1030})
      for (std::int64_t out : {1, 3, 67, 517}) {
        if (in * out > 100000 && rows > 3) continue;  // the float64 reference's time
        const auto x = random_floats(rng, rows * in);
        const std::vector<bf16> W = testing::random_bf16(rng, out * in);
        const std::vector<float> W_values = testing::widen(W);
        std::vector<float> y(static_cast<std::size_t>(rows * out), std::nanf(""));
        std::vector<float> y_fp32(y.size());
        linear_forward_skinny_bf16(rows, in, out, x.data(), W.data(), y.data());
        linear_forward_skinny(rows, in, out, x.data(), W_values.data(), y_fp32.data());
        EXPECT_TRUE(WithinBounds(y, reference(rows, in, out, x, W_values, nullptr)))
            << "rows=" << rows << " in=" << in << " out=" << out;
        for (std::size_t i = 0; i < y.size(); ++i)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(y[i]), std::bit_cast<std::uint32_t>(y_fp32[i]))
              << "rows=" << rows << " in=" << in << " out=" << out << " element " << i;
      }
  // Accumulating, on two threads.
  const std::int64_t rows = 2, in = 45, out = 29;
  const auto x = random_floats(rng, rows * in);
  const std::vector<bf16> W = testing::random_bf16(rng, out * in);
  const auto y0 = random_floats(rng, rows * out, -4.0f, 4.0f);
  std::vector<float> y = y0;
  testing::ThreadCountScope two(2);
  linear_forward_skinny_bf16(rows, in, out, x.data(), W.data(), y.data(), /*accumulate=*/true);
  EXPECT_TRUE(WithinBounds(y, reference(rows, in, out, x, testing::widen(W), &y0)));
}

ORIGAMI_ON_EVERY_SIMD_TARGET(Gemv);

TEST(GemvChecks, EmptyAndOversizedBatches) {
  linear_forward_skinny(0, 8, 8, nullptr, nullptr, nullptr);  // nothing to do, nothing read
  std::vector<float> y(3, 1.0f);
  linear_forward_skinny(1, 0, 3, nullptr, nullptr, y.data());  // empty sums: zeros
  EXPECT_EQ(y, std::vector<float>(3, 0.0f));
  std::vector<float> big(static_cast<std::size_t>((kSkinnyMaxRows + 1) * 4));
  EXPECT_THROW(linear_forward_skinny(kSkinnyMaxRows + 1, 4, 1, big.data(), big.data(), big.data()),
               Error);
  EXPECT_THROW(linear_forward_skinny(-1, 4, 1, big.data(), big.data(), big.data()), Error);
  std::vector<bf16> big_w(big.size());
  EXPECT_THROW(
      linear_forward_skinny_bf16(kSkinnyMaxRows + 1, 4, 1, big.data(), big_w.data(), big.data()),
      Error);
  linear_forward_skinny_bf16(1, 0, 3, nullptr, nullptr, y.data());
  EXPECT_EQ(y, std::vector<float>(3, 0.0f));
}

}  // namespace
}  // namespace origami::kernels
