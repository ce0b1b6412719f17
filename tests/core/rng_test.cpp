#include "origami/core/rng.h"

#include <cmath>

#include <gtest/gtest.h>

namespace origami {
namespace {

// Known-answer vectors from the Random123 distribution (kat_vectors, philox4x32_10).
TEST(Philox, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(rng::philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (rng::Counter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(rng::philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                               {0xffffffffu, 0xffffffffu}),
            (rng::Counter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(rng::philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                               {0xa4093822u, 0x299f31d0u}),
            (rng::Counter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, NormalHasUnitMomentsAndDependsOnSeedAndName) {
  const auto key = rng::make_key(1234, "w");
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = rng::normal(key, static_cast<std::uint64_t>(i));
    sum += x;
    sq += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.01);
  EXPECT_NE(rng::normal(rng::make_key(1234, "w"), 5), rng::normal(rng::make_key(1235, "w"), 5));
  EXPECT_NE(rng::normal(rng::make_key(1234, "w"), 5), rng::normal(rng::make_key(1234, "v"), 5));
}

TEST(Philox, SliceInitialisedAloneEqualsSliceOfFullTensorBitForBit) {
  MemoryTracker t;
  const Shape global{7, 13};
  Tensor full(t, MemCategory::Parameters, global);
  rng::fill_normal_block(full, 42, "model.layers.0.mlp.up_proj.weight", global, {0, 0}, 0.02);
  // An odd-sized block in the middle, as a shard of rows and columns would be.
  Tensor block(t, MemCategory::Parameters, {3, 5});
  rng::fill_normal_block(block, 42, "model.layers.0.mlp.up_proj.weight", global, {2, 6}, 0.02);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 5; ++c)
      EXPECT_EQ(block.f32()[r * 5 + c], full.f32()[(r + 2) * 13 + (c + 6)]) << r << "," << c;
  Tensor outside(t, MemCategory::Parameters, {3, 5});
  EXPECT_THROW(rng::fill_normal_block(outside, 42, "x", global, {5, 0}, 1.0), Error);
}

}  // namespace
}  // namespace origami
