// RoPE on bf16 rows (rope_forward_bf16, rope_backward_bf16) against the float64 rotation by
// float64 angles of the same bf16 inputs, within one bf16 rounding (bf16_test_util.h), on every
// SIMD target; and bit for bit the fp32 kernel on the widened rows, rounded once.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "bf16_test_util.h"
#include "origami/core/error.h"
#include "origami/kernels/rope.h"
#include "simd_targets.h"
#include "test_util.h"

namespace origami::kernels {
namespace {

constexpr double kTheta = 10000.0;

struct Shape {
  std::int64_t B, S, H, d;
};
constexpr Shape kShapes[] = {
    {1, 1, 1, 2}, {2, 5, 3, 6}, {1, 7, 2, 34}, {2, 9, 3, 64}, {1, 3, 1, 130}};

struct Tables {
  std::vector<float> cos, sin;
};
Tables make_tables(std::int64_t max_pos, std::int64_t d) {
  Tables t{std::vector<float>(static_cast<std::size_t>(max_pos * d / 2)),
           std::vector<float>(static_cast<std::size_t>(max_pos * d / 2))};
  rope_table(max_pos, d, kTheta, t.cos.data(), t.sin.data());
  return t;
}

// Positions scattered over [0, max_pos) (global positions of a shard, as in the engine).
std::vector<std::int64_t> positions(std::mt19937& rng, std::int64_t S, std::int64_t max_pos) {
  std::uniform_int_distribution<std::int64_t> dist(0, max_pos - 1);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(S));
  for (auto& p : pos) p = dist(rng);
  return pos;
}

// The rotation in float64 (sign -1: the transpose) and, per element, m = |x_i cos| + |x_j sin|.
void reference(const Shape& c, const std::vector<std::int64_t>& pos, const std::vector<double>& x,
               double sign, std::vector<double>& out, std::vector<double>& mag) {
  out.assign(x.size(), 0.0);
  mag.assign(x.size(), 0.0);
  const std::int64_t half = c.d / 2;
  for (std::int64_t b = 0; b < c.B; ++b)
    for (std::int64_t s = 0; s < c.S; ++s)
      for (std::int64_t h = 0; h < c.H; ++h)
        for (std::int64_t i = 0; i < half; ++i) {
          const double angle = double(pos[static_cast<std::size_t>(s)]) *
                               std::pow(kTheta, -2.0 * double(i) / double(c.d));
          const double co = std::cos(angle), si = sign * std::sin(angle);
          const auto k1 = static_cast<std::size_t>(((b * c.S + s) * c.H + h) * c.d + i);
          const auto k2 = k1 + static_cast<std::size_t>(half);
          out[k1] = x[k1] * co - x[k2] * si;
          out[k2] = x[k2] * co + x[k1] * si;
          mag[k1] = std::abs(x[k1] * co) + std::abs(x[k2] * si);
          mag[k2] = std::abs(x[k2] * co) + std::abs(x[k1] * si);
        }
}

class RopeBf16 : public testing::OnEverySimdTarget {};

TEST_P(RopeBf16, ForwardAndBackwardMatchFloat64ReferenceOnGlobalPositions) {
  std::mt19937 rng(131);
  for (const Shape& c : kShapes) {
    const std::int64_t max_pos = 4099;
    const auto tables = make_tables(max_pos, c.d);
    const auto pos = positions(rng, c.S, max_pos);
    const auto x = testing::random_bf16(rng, c.B * c.S * c.H * c.d, -2.0f, 2.0f);
    std::vector<double> ref, mag;
    for (const double sign : {1.0, -1.0}) {
      auto y = x;
      if (sign > 0) {
        rope_forward_bf16(c.B, c.S, c.H, c.d, pos.data(), tables.cos.data(), tables.sin.data(),
                          y.data());
      } else {
        rope_backward_bf16(c.B, c.S, c.H, c.d, pos.data(), tables.cos.data(), tables.sin.data(),
                           y.data());
      }
      reference(c, pos, testing::widen_to_double(x), sign, ref, mag);
      EXPECT_TRUE(testing::WithinOneBf16Rounding(y, ref, mag)) << c.d << " sign " << sign;
    }
  }
}

TEST_P(RopeBf16, EqualsTheFp32KernelRoundedOnce) {
  std::mt19937 rng(132);
  for (const Shape& c : kShapes) {
    const std::int64_t max_pos = 517;
    const auto tables = make_tables(max_pos, c.d);
    const auto pos = positions(rng, c.S, max_pos);
    const auto x = testing::random_bf16(rng, c.B * c.S * c.H * c.d, -2.0f, 2.0f);
    auto y = x, dx = x;
    auto y32 = testing::widen(x), dx32 = testing::widen(x);
    rope_forward_bf16(c.B, c.S, c.H, c.d, pos.data(), tables.cos.data(), tables.sin.data(),
                      y.data());
    rope_backward_bf16(c.B, c.S, c.H, c.d, pos.data(), tables.cos.data(), tables.sin.data(),
                       dx.data());
    rope_forward(c.B, c.S, c.H, c.d, pos.data(), tables.cos.data(), tables.sin.data(), y32.data());
    rope_backward(c.B, c.S, c.H, c.d, pos.data(), tables.cos.data(), tables.sin.data(),
                  dx32.data());
    EXPECT_TRUE(testing::bitwise_equal(y, testing::narrow(y32))) << c.d;
    EXPECT_TRUE(testing::bitwise_equal(dx, testing::narrow(dx32))) << c.d;
  }
}

TEST_P(RopeBf16, OneAndTwoThreadsAreBitwiseIdentical) {
  std::mt19937 rng(133);
  const std::int64_t B = 2, S = 301, H = 4, d = 64;
  const auto tables = make_tables(S, d);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(S));
  for (std::int64_t s = 0; s < S; ++s) pos[static_cast<std::size_t>(s)] = s;
  const auto x = testing::random_bf16(rng, B * S * H * d);
  auto run = [&](int threads) {
    testing::ThreadCountScope scope(threads);
    auto y = x, dx = x;
    rope_forward_bf16(B, S, H, d, pos.data(), tables.cos.data(), tables.sin.data(), y.data());
    rope_backward_bf16(B, S, H, d, pos.data(), tables.cos.data(), tables.sin.data(), dx.data());
    y.insert(y.end(), dx.begin(), dx.end());
    return y;
  };
  EXPECT_TRUE(testing::bitwise_equal(run(1), run(2)));
}

TEST(RopeBf16Checks, OddHeadDimAndNegativePositions) {
  const auto tables = make_tables(4, 4);
  std::vector<bf16> x(12);
  const std::int64_t pos[] = {0, -1, 2};
  EXPECT_THROW(rope_forward_bf16(1, 1, 1, 3, pos, tables.cos.data(), tables.sin.data(), x.data()),
               Error);
  EXPECT_THROW(rope_backward_bf16(1, 3, 1, 4, pos, tables.cos.data(), tables.sin.data(), x.data()),
               Error);
  EXPECT_THROW(rope_forward_bf16(-1, 1, 1, 4, pos, tables.cos.data(), tables.sin.data(), x.data()),
               Error);
}

ORIGAMI_ON_EVERY_SIMD_TARGET(RopeBf16);

}  // namespace
}  // namespace origami::kernels
