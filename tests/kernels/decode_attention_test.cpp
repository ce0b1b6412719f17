// decode_attention (one decode step's attention for the whole batch) against a float64
// reference and against attention_forward called per sequence, on every SIMD target of this
// machine; sizes that leave partial vectors (d = 20, 67) and partial key tiles.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "bf16_test_util.h"
#include "origami/core/error.h"
#include "origami/kernels/attention.h"
#include "origami/kernels/decode_attention.h"
#include "simd_targets.h"
#include "test_util.h"

namespace origami::kernels {
namespace {

using testing::random_floats;

class DecodeAttention : public testing::OnEverySimdTarget {};

// A cache as the engine keeps it: the first S slots hold a permutation of 0..S-1 (a prefill's
// rows in layout order), slot j >= S holds position j; sequence b's query sits at q_pos[b] and
// searches max(S, q_pos + 1) slots.
struct Case {
  DecodeAttentionShape s;
  std::vector<float> q, k, v;
  std::vector<std::int64_t> q_pos, slot_pos, visible;
};

Case make_case(std::mt19937& rng, std::int64_t B, std::int64_t S, std::int64_t slots,
               std::int64_t H, std::int64_t Hkv, std::int64_t d) {
  Case c;
  c.s = {.batch = B, .slots = slots, .heads = H, .kv_heads = Hkv, .head_dim = d};
  c.q = random_floats(rng, B * H * d, -2.0f, 2.0f);
  c.k = random_floats(rng, B * slots * Hkv * d, -2.0f, 2.0f);
  c.v = random_floats(rng, B * slots * Hkv * d);
  c.slot_pos.resize(static_cast<std::size_t>(slots));
  std::iota(c.slot_pos.begin(), c.slot_pos.end(), 0);
  std::shuffle(c.slot_pos.begin(), c.slot_pos.begin() + S, rng);
  std::uniform_int_distribution<std::int64_t> at(0, slots - 1);
  for (std::int64_t b = 0; b < B; ++b) {
    c.q_pos.push_back(at(rng));
    c.visible.push_back(std::max(S, c.q_pos.back() + 1));
  }
  return c;
}

std::vector<double> reference(const Case& c, float scale) {
  const auto& s = c.s;
  const std::int64_t d = s.head_dim, rep = s.heads / s.kv_heads, kvd = s.kv_heads * d;
  std::vector<double> out(static_cast<std::size_t>(s.batch * s.heads * d), 0.0);
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = 0; h < s.heads; ++h) {
      const std::int64_t g = h / rep;
      std::vector<double> score;
      std::vector<std::int64_t> slot;
      for (std::int64_t j = 0; j < c.visible[static_cast<std::size_t>(b)]; ++j) {
        if (c.slot_pos[static_cast<std::size_t>(j)] > c.q_pos[static_cast<std::size_t>(b)])
          continue;
        double dot = 0;
        for (std::int64_t e = 0; e < d; ++e)
          dot += double{c.q[static_cast<std::size_t>((b * s.heads + h) * d + e)]} *
                 c.k[static_cast<std::size_t>((b * s.slots + j) * kvd + g * d + e)];
        score.push_back(dot * scale);
        slot.push_back(j);
      }
      if (score.empty()) continue;
      const double m = *std::max_element(score.begin(), score.end());
      double l = 0;
      for (double& x : score) l += (x = std::exp(x - m));
      for (std::size_t i = 0; i < slot.size(); ++i)
        for (std::int64_t e = 0; e < d; ++e)
          out[static_cast<std::size_t>((b * s.heads + h) * d + e)] +=
              score[i] / l *
              c.v[static_cast<std::size_t>((b * s.slots + slot[i]) * kvd + g * d + e)];
    }
  return out;
}

std::vector<float> run(const Case& c, float scale) {
  std::vector<float> out(c.q.size(), std::nanf(""));
  decode_attention(c.s, c.q.data(), c.k.data(), c.v.data(), c.q_pos.data(), c.slot_pos.data(),
                   c.visible.data(), scale, out.data());
  return out;
}

TEST_P(DecodeAttention, MatchesFloat64ReferenceAndTheAttentionKernelPerSequence) {
  std::mt19937 rng(42);
  struct Dims {
    std::int64_t B, S, slots, H, Hkv, d;
  };
  for (const Dims& x : {Dims{1, 5, 9, 4, 4, 16}, Dims{3, 11, 77, 8, 2, 20},
                        Dims{5, 40, 45, 6, 3, 67}, Dims{2, 1, 130, 16, 4, 64}}) {
    const Case c = make_case(rng, x.B, x.S, x.slots, x.H, x.Hkv, x.d);
    const float scale = 1.0f / std::sqrt(static_cast<float>(x.d));
    const std::vector<float> got = run(c, scale);
    EXPECT_TRUE(testing::RelClose(got, reference(c, scale), 1e-6))
        << "B=" << x.B << " slots=" << x.slots << " d=" << x.d;
    // attention_forward, one call per sequence (what the engine did before).
    const std::int64_t hd = x.H * x.d, kvd = x.Hkv * x.d;
    std::vector<float> per(got.size()), lse(static_cast<std::size_t>(x.H));
    for (std::int64_t b = 0; b < x.B; ++b) {
      const AttentionShape one{.batch = 1,
                               .q_len = 1,
                               .kv_len = c.visible[static_cast<std::size_t>(b)],
                               .heads = x.H,
                               .kv_heads = x.Hkv,
                               .head_dim = x.d};
      attention_forward(one, c.q.data() + b * hd, c.k.data() + b * x.slots * kvd,
                        c.v.data() + b * x.slots * kvd, &c.q_pos[static_cast<std::size_t>(b)],
                        c.slot_pos.data(), scale, per.data() + b * hd, lse.data());
    }
    EXPECT_TRUE(testing::RelClose(got, per, 1e-6)) << "B=" << x.B << " d=" << x.d;
  }
}

TEST_P(DecodeAttention, AQueryThatSeesNothingGetsZerosAndThreadsDoNotChangeBits) {
  std::mt19937 rng(43);
  Case c = make_case(rng, 4, 8, 20, 8, 2, 24);
  c.q_pos[1] = -1;  // before every slot
  const std::vector<float> one = run(c, 0.3f);
  for (std::int64_t i = 0; i < 8 * 24; ++i)
    EXPECT_EQ(one[static_cast<std::size_t>(8 * 24 + i)], 0.0f);
  testing::ThreadCountScope two(2);
  const std::vector<float> again = run(c, 0.3f);
  for (std::size_t i = 0; i < one.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(one[i]), std::bit_cast<std::uint32_t>(again[i])) << i;
}

// A bf16 cache: keys and values widened exactly, so the reference is the float64 attention of
// the bf16 values (the same fp32 bound as above, 1e-6 relative), and the output is bitwise the
// fp32 kernel's on those values (one body, one order).
TEST_P(DecodeAttention, Bf16CacheMatchesFloat64ReferenceAndTheFp32KernelBitwise) {
  std::mt19937 rng(44);
  struct Dims {
    std::int64_t B, S, slots, H, Hkv, d;
  };
  for (const Dims& x : {Dims{1, 5, 9, 4, 4, 16}, Dims{3, 11, 77, 8, 2, 20},
                        Dims{5, 40, 45, 6, 3, 67}, Dims{2, 1, 130, 16, 4, 64}}) {
    Case c = make_case(rng, x.B, x.S, x.slots, x.H, x.Hkv, x.d);
    const std::vector<bf16> k = testing::narrow(c.k), v = testing::narrow(c.v);
    c.k = testing::widen(k);
    c.v = testing::widen(v);
    const float scale = 1.0f / std::sqrt(static_cast<float>(x.d));
    std::vector<float> got(c.q.size(), std::nanf(""));
    decode_attention_bf16(c.s, c.q.data(), k.data(), v.data(), c.q_pos.data(), c.slot_pos.data(),
                          c.visible.data(), scale, got.data());
    EXPECT_TRUE(testing::RelClose(got, reference(c, scale), 1e-6))
        << "B=" << x.B << " slots=" << x.slots << " d=" << x.d;
    const std::vector<float> fp32 = run(c, scale);
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(fp32[i]))
          << "B=" << x.B << " d=" << x.d << " element " << i;
  }
}

ORIGAMI_ON_EVERY_SIMD_TARGET(DecodeAttention);

TEST(DecodeAttentionChecks, RefusesBadShapes) {
  std::vector<float> buf(64);
  std::vector<std::int64_t> pos{0, 1, 2, 3}, visible{4};
  const auto call = [&](DecodeAttentionShape s) {
    decode_attention(s, buf.data(), buf.data(), buf.data(), pos.data(), pos.data(), visible.data(),
                     1.0f, buf.data());
  };
  EXPECT_THROW(call({.batch = 1, .slots = 4, .heads = 3, .kv_heads = 2, .head_dim = 2}), Error);
  EXPECT_THROW(call({.batch = 1, .slots = 3, .heads = 2, .kv_heads = 1, .head_dim = 2}), Error);
  EXPECT_THROW(call({.batch = 1,
                     .slots = 4,
                     .heads = 2 * (kDecodeAttentionMaxRep + 1),
                     .kv_heads = 2,
                     .head_dim = 1}),
               Error);
  call({.batch = 0, .slots = 4, .heads = 2, .kv_heads = 1, .head_dim = 2});  // nothing to do
}

}  // namespace
}  // namespace origami::kernels
