// bf16 casts (core/bf16.h, kernels/convert.h) against an independent reference: the nearest
// bf16 found by comparing the two neighbours in float64, ties to the even mantissa.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "origami/core/bf16.h"
#include "origami/kernels/convert.h"
#include "simd_targets.h"
#include "test_util.h"

namespace origami::kernels {
namespace {

float bits_to_float(std::uint32_t u) { return std::bit_cast<float>(u); }

// The bf16 nearest to a finite x by value (IEEE rounding with an unbounded exponent, then
// overflow to infinity): the truncation t and the next bf16 away from zero,
// compared in float64; on a tie the one whose last mantissa bit is 0.
std::uint16_t nearest_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const auto t = static_cast<std::uint16_t>(u >> 16);
  const auto up = static_cast<std::uint16_t>(t + 1);  // next magnitude (may become infinity)
  const double lo = std::fabs(static_cast<double>(to_float(bf16{t})));
  // Past the largest finite bf16 the next step up is 2^128 (which rounds to infinity).
  const double hi = (up & 0x7fffu) == 0x7f80u
                        ? std::ldexp(1.0, 128)
                        : std::fabs(static_cast<double>(to_float(bf16{up})));
  const double ax = std::fabs(static_cast<double>(x));
  if (ax - lo < hi - ax) return t;
  if (ax - lo > hi - ax) return up;
  return (t & 1u) == 0 ? t : up;
}

TEST(Bf16Scalar, KnownValuesTiesAndSpecials) {
  EXPECT_EQ(to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(to_bf16(-2.0f).bits, 0xc000);
  EXPECT_EQ(to_bf16(0.0f).bits, 0x0000);
  EXPECT_EQ(to_bf16(-0.0f).bits, 0x8000);
  // Exactly half-way: to the even neighbour, down for ...80 and up for ...81.
  EXPECT_EQ(to_bf16(bits_to_float(0x3f808000u)).bits, 0x3f80);
  EXPECT_EQ(to_bf16(bits_to_float(0x3f818000u)).bits, 0x3f82);
  EXPECT_EQ(to_bf16(bits_to_float(0x3f808001u)).bits, 0x3f81);
  EXPECT_EQ(to_bf16(bits_to_float(0x3f807fffu)).bits, 0x3f80);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::infinity()).bits, 0x7f80);
  EXPECT_EQ(to_bf16(-std::numeric_limits<float>::infinity()).bits, 0xff80);
  // The largest float is nearer to infinity than to bf16's largest finite value.
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()).bits, 0x7f80);
  // A NaN whose payload is all in the low bits stays NaN, sign kept.
  EXPECT_TRUE(std::isnan(to_float(to_bf16(bits_to_float(0x7f800001u)))));
  EXPECT_EQ(to_bf16(bits_to_float(0xff800001u)).bits & 0x8000, 0x8000);
  EXPECT_TRUE(std::isnan(to_float(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // Subnormals round by the same rule.
  EXPECT_EQ(to_bf16(bits_to_float(0x00008000u)).bits, 0x0000);
  EXPECT_EQ(to_bf16(bits_to_float(0x00018000u)).bits, 0x0002);
}

TEST(Bf16Scalar, NearestOnRandomBitPatterns) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    const float x = bits_to_float(any(rng));
    if (!std::isfinite(x)) continue;
    ASSERT_EQ(to_bf16(x).bits, nearest_bf16(x)) << std::hex << std::bit_cast<std::uint32_t>(x);
  }
}

TEST(Bf16Scalar, EveryBf16WidensExactlyAndNarrowsBack) {
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const float f = to_float(bf16{static_cast<std::uint16_t>(b)});
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(to_float(to_bf16(f))));
      continue;
    }
    ASSERT_EQ(to_bf16(f).bits, b);
  }
}

// The vector conversions give the scalar's bits on every target, for every length.
class Bf16Convert : public testing::OnEverySimdTarget {};

TEST_P(Bf16Convert, VectorsGiveTheScalarBitsAtEveryLength) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::uint32_t> any;
  for (std::int64_t n : {0, 1, 3, 7, 15, 16, 17, 31, 33, 100, 1000, 70001}) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& v : x) v = bits_to_float(any(rng));  // NaNs, infinities and subnormals included
    const float specials[] = {0.0f, -0.0f, bits_to_float(0x3f808000u), bits_to_float(0x3f818000u),
                              std::numeric_limits<float>::max(),
                              std::numeric_limits<float>::infinity(),
                              bits_to_float(0x7f800001u), bits_to_float(0x00018000u)};
    for (std::size_t i = 0; i < x.size() && i < std::size(specials); ++i) x[i * 7 % x.size()] = specials[i];
    // One element past the end, which neither conversion may write.
    std::vector<bf16> b(static_cast<std::size_t>(n) + 1, bf16{0x1234});
    convert_to_bf16(n, x.data(), b.data());
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i]))
        ASSERT_TRUE(std::isnan(to_float(b[i]))) << "n=" << n << " i=" << i;
      else
        ASSERT_EQ(b[i].bits, to_bf16(x[i]).bits) << "n=" << n << " i=" << i;
    }
    EXPECT_EQ(b.back().bits, 0x1234);
    std::vector<float> back(static_cast<std::size_t>(n) + 1, -7.0f);
    convert_to_float(n, b.data(), back.data());
    for (std::size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(back[i]), std::uint32_t{b[i].bits} << 16);
    EXPECT_EQ(back.back(), -7.0f);
  }
}

TEST_P(Bf16Convert, IndependentOfTheThreadCount) {
  std::mt19937 rng(12);
  const auto x = testing::random_floats(rng, 300001, -100.0f, 100.0f);
  std::vector<bf16> one(x.size()), two(x.size());
  {
    testing::ThreadCountScope threads(1);
    convert_to_bf16(static_cast<std::int64_t>(x.size()), x.data(), one.data());
  }
  {
    testing::ThreadCountScope threads(2);
    convert_to_bf16(static_cast<std::int64_t>(x.size()), x.data(), two.data());
  }
  EXPECT_EQ(one, two);
}

// Rounding in place (training's bf16 K/V): each value becomes the scalar's bf16, widened, at
// lengths across the 4096-element chunks it works in; nothing past n is written.
TEST_P(Bf16Convert, RoundingInPlaceGivesTheScalarsValues) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (std::int64_t n : {0, 1, 17, 4095, 4096, 4097, 10001}) {
    std::vector<float> x(static_cast<std::size_t>(n) + 1);
    for (float& v : x) v = normal(rng);
    x.back() = 0.1f;  // not a bf16 value: it would change if written
    const std::vector<float> before = x;
    round_floats_to_bf16(n, x.data());
    for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(x[i]),
                std::bit_cast<std::uint32_t>(round_to_bf16(before[i])))
          << "n=" << n << " i=" << i;
    EXPECT_EQ(x.back(), 0.1f) << "n=" << n;
  }
}

ORIGAMI_ON_EVERY_SIMD_TARGET(Bf16Convert);

}  // namespace
}  // namespace origami::kernels
