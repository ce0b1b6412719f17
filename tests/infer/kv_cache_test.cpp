// The KV cache's slot bookkeeping (infer/kv_cache.h): prefill rows moved in place from
// [B, S] to [B, capacity], positions kept per slot, decoded positions mapped to their slot.
#include <gtest/gtest.h>

#include "origami/core/error.h"
#include "origami/infer/kv_cache.h"

namespace origami::infer {
namespace {

TEST(KvCache, SpreadsPrefillRowsAndMapsPositionsToSlots) {
  MemoryTracker tracker;
  const std::vector<std::int64_t> gathered{0, 3, 1, 2};  // e.g. two ranks' zigzag rows
  KvCache cache(tracker, /*layers=*/2, /*batch=*/3, /*capacity=*/7, /*width=*/2, gathered);
  EXPECT_EQ(tracker.current(MemCategory::KvCache), 2 * 2 * 3 * 7 * 2 * 4);
  for (std::int64_t l = 0; l < 2; ++l) {
    float* k = cache.prefill_k(l);
    float* v = cache.prefill_v(l);
    for (std::int64_t b = 0; b < 3; ++b)
      for (std::int64_t s = 0; s < 4; ++s)
        for (std::int64_t i = 0; i < 2; ++i) {
          k[(b * 4 + s) * 2 + i] = static_cast<float>(1000 * l + 100 * b + 10 * s + i);
          v[(b * 4 + s) * 2 + i] = -static_cast<float>(1000 * l + 100 * b + 10 * s + i);
        }
    cache.spread_prefill(l);
  }
  for (std::int64_t l = 0; l < 2; ++l)
    for (std::int64_t b = 0; b < 3; ++b)
      for (std::int64_t s = 0; s < 4; ++s)
        for (std::int64_t i = 0; i < 2; ++i) {
          EXPECT_EQ(cache.k(l, b)[s * 2 + i], static_cast<float>(1000 * l + 100 * b + 10 * s + i));
          EXPECT_EQ(cache.v(l, b)[s * 2 + i], -static_cast<float>(1000 * l + 100 * b + 10 * s + i));
        }
  EXPECT_EQ(cache.slot_of(0), 0);
  EXPECT_EQ(cache.slot_of(3), 1);  // a padded position's slot, overwritten by its decode
  EXPECT_EQ(cache.slot_of(2), 3);
  EXPECT_EQ(cache.slot_of(5), 5);  // beyond the prefill: slot = position
  EXPECT_EQ(cache.slot_positions(), (std::vector<std::int64_t>{0, 3, 1, 2, 4, 5, 6}));
  EXPECT_EQ(cache.visible_slots(1), 4);  // every prefill slot (later positions are masked)
  EXPECT_EQ(cache.visible_slots(5), 6);
  EXPECT_THROW(cache.slot_of(7), Error);
}

TEST(KvCache, RefusesPositionsThatAreNotAPermutation) {
  MemoryTracker tracker;
  EXPECT_THROW(KvCache(tracker, 1, 1, 4, 2, {0, 0, 1}), Error);
  EXPECT_THROW(KvCache(tracker, 1, 1, 2, 2, {0, 1, 2}), Error);  // capacity below the prefill
}

}  // namespace
}  // namespace origami::infer
