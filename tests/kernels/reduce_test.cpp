// The communicator's element-wise kernels (reduce.h) on every SIMD target: equal, bit for bit,
// to the scalar acc = acc + in and acc = in > acc ? in : acc for every element type and every
// length around the vector widths, nothing written past n; NaN as documented. And the plain
// sum against float64; the bf16 sums against core/bf16.h's scalar rounding.
#include "origami/kernels/reduce.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "simd_targets.h"

namespace origami::kernels {
namespace {

class Reduce : public testing::OnEverySimdTarget {};

template <class T>
std::vector<T> random_values(std::mt19937& rng, std::size_t n) {
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> dist(-100, 100);
    for (T& x : v) x = dist(rng);
  } else {
    std::uniform_int_distribution<T> dist(-1000000, 1000000);
    for (T& x : v) x = dist(rng);
  }
  return v;
}

template <class T>
void expect_like_scalar() {
  std::mt19937 rng(71);
  for (std::int64_t n = 0; n <= 70; ++n) {
    const auto un = static_cast<std::size_t>(n);
    const auto in = random_values<T>(rng, un + 1);
    const auto acc0 = random_values<T>(rng, un + 1);  // the element at n is a guard
    auto sum = acc0, max = acc0;
    add_into(n, sum.data(), in.data());
    max_into(n, max.data(), in.data());
    for (std::size_t i = 0; i < un; ++i) {
      const T want_sum = static_cast<T>(acc0[i] + in[i]);
      const T want_max = in[i] > acc0[i] ? in[i] : acc0[i];
      ASSERT_EQ(std::memcmp(&sum[i], &want_sum, sizeof(T)), 0) << n << " " << i;
      ASSERT_EQ(std::memcmp(&max[i], &want_max, sizeof(T)), 0) << n << " " << i;
    }
    EXPECT_EQ(std::memcmp(&sum[un], &acc0[un], sizeof(T)), 0) << "written past n = " << n;
    EXPECT_EQ(std::memcmp(&max[un], &acc0[un], sizeof(T)), 0) << "written past n = " << n;
  }
}

TEST_P(Reduce, EveryTypeEqualsTheScalarLoop) {
  expect_like_scalar<float>();
  expect_like_scalar<double>();
  expect_like_scalar<std::int32_t>();
  expect_like_scalar<std::int64_t>();
}

TEST_P(Reduce, NaNAndInfinities) {
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr float inf = std::numeric_limits<float>::infinity();
  std::vector<float> acc = {nan, 1.0f, -inf, 2.0f, inf};
  const std::vector<float> in = {1.0f, nan, 3.0f, inf, -inf};
  auto sum = acc;
  add_into(5, sum.data(), in.data());
  EXPECT_TRUE(std::isnan(sum[0]) && std::isnan(sum[1]) && std::isnan(sum[4]));
  EXPECT_EQ(sum[2], -inf);
  EXPECT_EQ(sum[3], inf);
  max_into(5, acc.data(), in.data());
  EXPECT_TRUE(std::isnan(acc[0]));  // a NaN in acc stays
  EXPECT_EQ(acc[1], 1.0f);          // one in `in` does not replace a number
  EXPECT_EQ(acc[2], 3.0f);
  EXPECT_EQ(acc[3], inf);
  EXPECT_EQ(acc[4], inf);
}

// sum(): within the float bound of its float64 value, gamma_n * sum |x| (four accumulators
// only lower it), at lengths around and past the vector widths and n = 0; the element past n
// (a NaN) is never read.
TEST_P(Reduce, SumMatchesFloat64Reference) {
  std::mt19937 rng(72);
  for (std::int64_t n : {0, 1, 3, 15, 17, 63, 65, 1001, 40009}) {
    auto x = random_values<float>(rng, static_cast<std::size_t>(n) + 1);
    x.back() = std::numeric_limits<float>::quiet_NaN();  // past n: must not be read
    double exact = 0, magnitude = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      exact += x[static_cast<std::size_t>(i)];
      magnitude += std::abs(x[static_cast<std::size_t>(i)]);
    }
    const double u = std::ldexp(1.0, -24), nu = static_cast<double>(n) * u;
    EXPECT_LE(std::abs(static_cast<double>(sum(n, x.data())) - exact),
              nu / (1 - nu) * magnitude + u * std::abs(exact))
        << "n=" << n;
  }
  EXPECT_EQ(sum(0, nullptr), 0.0f);
}

// The bf16 sums: bit for bit to_bf16(float(acc) + in) of core/bf16.h's scalar rounding (the
// fp32 sum of two bf16 values or of a bf16 and a float), every length around the vector widths,
// nothing past n; ties rounded to even; NaN kept; a sum past bf16's range is infinite.
TEST_P(Reduce, Bf16SumsRoundTheFp32SumOnce) {
  std::mt19937 rng(73);
  for (std::int64_t n = 0; n <= 70; ++n) {
    const auto un = static_cast<std::size_t>(n);
    const auto a = random_values<float>(rng, un + 1), b = random_values<float>(rng, un + 1);
    std::vector<bf16> acc0(un + 1), in(un + 1);
    for (std::size_t i = 0; i <= un; ++i) {
      acc0[i] = to_bf16(a[i]);
      in[i] = to_bf16(b[i] * std::ldexp(1.0f, static_cast<int>(i % 9) - 4));  // mixed scales
    }
    std::vector<float> inf32(b.begin(), b.end());
    auto both = acc0, mixed = acc0;
    add_into(n, both.data(), in.data());
    add_into(n, mixed.data(), inf32.data());
    for (std::size_t i = 0; i < un; ++i) {
      ASSERT_EQ(both[i], to_bf16(to_float(acc0[i]) + to_float(in[i]))) << n << " " << i;
      ASSERT_EQ(mixed[i], to_bf16(to_float(acc0[i]) + inf32[i])) << n << " " << i;
    }
    EXPECT_EQ(both[un], acc0[un]) << "written past n = " << n;
    EXPECT_EQ(mixed[un], acc0[un]) << "written past n = " << n;
  }
  // 1 + 2^-8 is halfway between bf16's 1 and 1 + 2^-7: to even (1); 1 + 3 * 2^-8 to 1 + 2^-6.
  std::vector<bf16> acc = {to_bf16(1.0f), to_bf16(1.0f), to_bf16(3e38f), to_bf16(1.0f)};
  const std::vector<float> in = {std::ldexp(1.0f, -8), 3 * std::ldexp(1.0f, -8), 3e38f,
                                 std::numeric_limits<float>::quiet_NaN()};
  add_into(4, acc.data(), in.data());
  EXPECT_EQ(to_float(acc[0]), 1.0f);
  EXPECT_EQ(to_float(acc[1]), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(to_float(acc[2]), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(to_float(acc[3])));
}

ORIGAMI_ON_EVERY_SIMD_TARGET(Reduce);

}  // namespace
}  // namespace origami::kernels
