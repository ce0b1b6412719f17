#include "origami/kernels/rope.h"

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

constexpr double kTheta = 10000.0;

double angle(std::int64_t p, std::int64_t i, std::int64_t d) {
  return double(p) * std::pow(kTheta, -2.0 * double(i) / double(d));
}

// float64 rotation of x [B, S, H, d] (HF rotate_half); transpose = true applies R^T.
std::vector<double> rope_reference(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t d,
                                   const std::vector<std::int64_t>& pos, std::vector<double> x,
                                   bool transpose) {
  const std::int64_t half = d / 2;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t s = 0; s < S; ++s)
      for (std::int64_t hd = 0; hd < H; ++hd)
        for (std::int64_t i = 0; i < half; ++i) {
          const std::size_t k1 = static_cast<std::size_t>(((b * S + s) * H + hd) * d + i), k2 = k1 + static_cast<std::size_t>(half);
          const double c = std::cos(angle(pos[static_cast<std::size_t>(s)], i, d));
          const double sn = (transpose ? -1.0 : 1.0) * std::sin(angle(pos[static_cast<std::size_t>(s)], i, d));
          const double a = x[k1], bb = x[k2];
          x[k1] = a * c - bb * sn;
          x[k2] = bb * c + a * sn;
        }
  return x;
}

struct Tables {
  std::vector<float> cos, sin;
};
Tables make_tables(std::int64_t max_pos, std::int64_t d) {
  Tables t{std::vector<float>(static_cast<std::size_t>(max_pos * d / 2)), std::vector<float>(static_cast<std::size_t>(max_pos * d / 2))};
  rope_table(max_pos, d, kTheta, t.cos.data(), t.sin.data());
  return t;
}

TEST(RopeTable, TableMatchesFloat64Angles) {
  const std::int64_t max_pos = 300, d = 34;
  const auto t = make_tables(max_pos, d);
  std::vector<double> c(t.cos.size()), s(t.sin.size());
  for (std::int64_t p = 0; p < max_pos; ++p)
    for (std::int64_t i = 0; i < d / 2; ++i) {
      c[static_cast<std::size_t>(p * d / 2 + i)] = std::cos(angle(p, i, d));
      s[static_cast<std::size_t>(p * d / 2 + i)] = std::sin(angle(p, i, d));
    }
  EXPECT_TRUE(RelClose(t.cos, c, 1e-7));
  EXPECT_TRUE(RelClose(t.sin, s, 1e-7));
  EXPECT_EQ(t.cos[0], 1.0f);
  EXPECT_EQ(t.sin[0], 0.0f);
}

// transformers' _compute_llama3_parameters in float64, element by element and with its own
// variable names: the reference the scaled table is held to.
double hf_llama3_inv_freq(double inv_freq, const RopeScaling& r) {
  const double factor = r.factor, low_freq_factor = r.low_freq_factor,
               high_freq_factor = r.high_freq_factor,
               old_context_len = r.original_max_position_embeddings;
  const double low_freq_wavelen = old_context_len / low_freq_factor;
  const double high_freq_wavelen = old_context_len / high_freq_factor;
  const double wavelen = 2 * 3.14159265358979323846 / inv_freq;
  const double inv_freq_llama = wavelen > low_freq_wavelen ? inv_freq / factor : inv_freq;
  const double smooth_factor =
      (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
  const double smoothed_inv_freq =
      (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama;
  const bool is_medium_freq = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
  return is_medium_freq ? smoothed_inv_freq : inv_freq_llama;
}

// The scaled tables against float64 angles p * f_i with f_i from the formulas above: llama3
// with every band populated (Llama 3.1's numbers, a short original context so that head size
// 34 spans all three) and linear; the position range goes past the original context.
TEST(RopeTable, ScaledTablesMatchTheHuggingFaceFormulasInFloat64) {
  const std::int64_t max_pos = 700, d = 34;
  RopeScaling llama3{.type = RopeScaling::Type::Llama3,
                     .factor = 8.0,
                     .low_freq_factor = 1.0,
                     .high_freq_factor = 4.0,
                     .original_max_position_embeddings = 256};
  RopeScaling linear{.type = RopeScaling::Type::Linear, .factor = 3.5};
  for (const RopeScaling& r : {llama3, linear}) {
    std::vector<double> f(d / 2);
    int low = 0, medium = 0, high = 0;
    for (std::int64_t i = 0; i < d / 2; ++i) {
      const double plain = std::pow(kTheta, -2.0 * double(i) / double(d));
      const double w = 2 * 3.14159265358979323846 / plain;
      (w < 256 / 4.0 ? high : w > 256 / 1.0 ? low : medium) += 1;
      f[static_cast<std::size_t>(i)] =
          r.type == RopeScaling::Type::Linear ? plain / r.factor : hf_llama3_inv_freq(plain, r);
    }
    EXPECT_GT(low * medium * high, 0) << "every llama3 band is exercised";
    const std::vector<double> got = rope_inverse_frequencies(d, kTheta, r);
    ASSERT_EQ(got.size(), f.size());
    for (std::size_t i = 0; i < f.size(); ++i)
      EXPECT_NEAR(got[i], f[i], 1e-15 * f[i]) << "frequency " << i;
    std::vector<float> ct(static_cast<std::size_t>(max_pos * d / 2)), st(ct.size());
    rope_table(max_pos, d, kTheta, r, ct.data(), st.data());
    std::vector<double> c(ct.size()), s(st.size());
    for (std::int64_t p = 0; p < max_pos; ++p)
      for (std::int64_t i = 0; i < d / 2; ++i) {
        const double a = double(p) * f[static_cast<std::size_t>(i)];
        c[static_cast<std::size_t>(p * d / 2 + i)] = std::cos(a);
        s[static_cast<std::size_t>(p * d / 2 + i)] = std::sin(a);
      }
    // fp32 tables of float64 angles: one rounding each, 1e-7 relative L2 over the table.
    EXPECT_TRUE(RelClose(ct, c, 1e-7));
    EXPECT_TRUE(RelClose(st, s, 1e-7));
  }
  // No scaling is plain RoPE, bit for bit.
  std::vector<float> a(static_cast<std::size_t>(9 * 5)), b(a.size()), sa(a.size()), sb(a.size());
  rope_table(9, 10, kTheta, RopeScaling{}, a.data(), sa.data());
  rope_table(9, 10, kTheta, b.data(), sb.data());
  EXPECT_EQ(a, b);
  EXPECT_EQ(sa, sb);
}

// The kernel tests run on every SIMD target of the machine (simd_targets.h).
class Rope : public testing::OnEverySimdTarget {};

TEST_P(Rope, ForwardAndBackwardMatchFloat64ReferenceOnGlobalPositions) {
  std::mt19937 rng(31);
  const std::int64_t max_pos = 4096;
  struct Case { std::int64_t B, S, H, d; };
  for (const Case& c : {Case{1, 1, 1, 2}, Case{2, 3, 3, 34}, Case{1, 17, 4, 64}, Case{3, 5, 1, 128}}) {
    const auto tables = make_tables(max_pos, c.d);
    std::vector<std::int64_t> pos(static_cast<std::size_t>(c.S));
    std::uniform_int_distribution<std::int64_t> pick(0, max_pos - 1);
    for (auto& p : pos) p = pick(rng);  // arbitrary global positions, as on a zigzag shard
    const auto x = random_floats(rng, c.B * c.S * c.H * c.d);
    auto y = x;
    rope_forward(c.B, c.S, c.H, c.d, pos.data(), tables.cos.data(), tables.sin.data(), y.data());
    EXPECT_TRUE(RelClose(y, rope_reference(c.B, c.S, c.H, c.d, pos, testing::to_double(x), false)));
    auto dx = x;
    rope_backward(c.B, c.S, c.H, c.d, pos.data(), tables.cos.data(), tables.sin.data(), dx.data());
    EXPECT_TRUE(RelClose(dx, rope_reference(c.B, c.S, c.H, c.d, pos, testing::to_double(x), true)));
    // The backward is the inverse rotation.
    rope_backward(c.B, c.S, c.H, c.d, pos.data(), tables.cos.data(), tables.sin.data(), y.data());
    EXPECT_TRUE(RelClose(y, testing::to_double(x)));
  }
}

TEST(RopeReference, ReferenceBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(32);
  const std::int64_t B = 1, S = 3, H = 2, d = 6;
  const std::vector<std::int64_t> pos = {5, 0, 77};
  const auto x = testing::to_double(random_floats(rng, B * S * H * d));
  const auto dy = testing::to_double(random_floats(rng, B * S * H * d));
  auto loss = [&](const std::vector<double>& v) {
    const auto y = rope_reference(B, S, H, d, pos, v, false);
    double l = 0.0;
    for (std::size_t k = 0; k < y.size(); ++k) l += y[k] * dy[k];
    return l;
  };
  EXPECT_LE(testing::rel_l2(rope_reference(B, S, H, d, pos, dy, true), testing::numeric_gradient(loss, x)), 1e-8);
}

TEST_P(Rope, ShardWithGlobalPositionsEqualsSliceOfFullSequence) {
  std::mt19937 rng(33);
  const std::int64_t B = 2, S = 8, H = 3, d = 16;
  const auto tables = make_tables(S, d);
  std::vector<std::int64_t> full_pos(S);
  for (std::int64_t s = 0; s < S; ++s) full_pos[static_cast<std::size_t>(s)] = s;
  const auto x = random_floats(rng, B * S * H * d);
  auto full = x;
  rope_forward(B, S, H, d, full_pos.data(), tables.cos.data(), tables.sin.data(), full.data());
  // Zigzag shard of rank 0 of D = 2 (chunks 0 and 3 of 4): positions 0, 1, 6, 7.
  const std::vector<std::int64_t> shard_pos = {0, 1, 6, 7};
  const std::int64_t Ss = 4, row = H * d;
  std::vector<float> shard(static_cast<std::size_t>(B * Ss * row)), expect(shard.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t s = 0; s < Ss; ++s)
      for (std::int64_t k = 0; k < row; ++k) {
        const std::size_t src = static_cast<std::size_t>((b * S + shard_pos[static_cast<std::size_t>(s)]) * row + k);
        shard[static_cast<std::size_t>((b * Ss + s) * row + k)] = x[src];
        expect[static_cast<std::size_t>((b * Ss + s) * row + k)] = full[src];
      }
  rope_forward(B, Ss, H, d, shard_pos.data(), tables.cos.data(), tables.sin.data(), shard.data());
  EXPECT_TRUE(testing::bitwise_equal(shard, expect));
}

TEST_P(Rope, OneAndTwoThreadsAreBitwiseIdentical) {
  std::mt19937 rng(34);
  const std::int64_t B = 2, S = 257, H = 4, d = 64;
  const auto tables = make_tables(S, d);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(S));
  for (std::int64_t s = 0; s < S; ++s) pos[static_cast<std::size_t>(s)] = s;
  const auto x = random_floats(rng, B * S * H * d);
  auto run = [&](int threads) {
    testing::ThreadCountScope scope(threads);
    auto y = x, dx = x;
    rope_forward(B, S, H, d, pos.data(), tables.cos.data(), tables.sin.data(), y.data());
    rope_backward(B, S, H, d, pos.data(), tables.cos.data(), tables.sin.data(), dx.data());
    y.insert(y.end(), dx.begin(), dx.end());
    return y;
  };
  EXPECT_TRUE(testing::bitwise_equal(run(1), run(2)));
}

TEST(RopeChecks, RejectsOddHeadDimAndNegativePositions) {
  const auto tables = make_tables(4, 4);
  std::vector<float> x(12, 1.0f);
  const std::vector<std::int64_t> pos = {0, 1};
  const std::vector<std::int64_t> bad = {0, -1};
  EXPECT_THROW(rope_forward(1, 2, 2, 3, pos.data(), tables.cos.data(), tables.sin.data(), x.data()), Error);
  EXPECT_THROW(rope_forward(1, 2, 1, 4, bad.data(), tables.cos.data(), tables.sin.data(), x.data()), Error);
  EXPECT_THROW(rope_backward(1, 2, 1, 4, bad.data(), tables.cos.data(), tables.sin.data(), x.data()), Error);
  float c = 0.0f, s = 0.0f;
  EXPECT_THROW(rope_table(1, 3, kTheta, &c, &s), Error);
  // Zero sizes are fine.
  rope_forward(0, 2, 1, 4, pos.data(), tables.cos.data(), tables.sin.data(), nullptr);
  rope_forward(1, 0, 1, 4, nullptr, tables.cos.data(), tables.sin.data(), nullptr);
}

ORIGAMI_ON_EVERY_SIMD_TARGET(Rope);

}  // namespace
}  // namespace origami::kernels
