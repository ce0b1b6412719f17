// The background prefetcher (data/prefetch.h) hands out exactly the sampler's batches, in
// order, for any start step and row share, and passes the thread's errors on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "origami/core/error.h"
#include "origami/data/prefetch.h"

namespace origami::data {
namespace {

std::vector<std::int32_t> values(const Tensor& t) {
  const std::int32_t* p = t.data<std::int32_t>();
  return {p, p + t.numel()};
}

TEST(BatchPrefetcher, GivesTheSamplersBatchesInOrder) {
  const TokenDataset d = TokenDataset::default_corpus();
  MemoryTracker tracker;
  const BatchShape shape{.batch = 4, .seq = 20, .per_step = 3, .first_row = 1, .rows = 2};
  for (const std::int64_t first_step : {1, 5}) {
    BatchPrefetcher pre(d, 11, shape, first_step, 9, tracker);
    BatchSampler sampler(d, 11, (first_step - 1) * shape.per_step);
    for (std::int64_t step = first_step; step <= 9; ++step) {
      const BatchPrefetcher::Step got = pre.next();
      ASSERT_EQ(got.micro.size(), 3u);
      EXPECT_GE(got.wait_seconds, 0);
      for (const Batch& b : got.micro) {
        const Batch want = sampler.next_rows(4, 1, 2, 20, tracker);
        EXPECT_EQ(values(b.input_ids), values(want.input_ids)) << "step " << step;
        EXPECT_EQ(values(b.labels), values(want.labels));
      }
    }
    EXPECT_THROW(pre.next(), Error);  // past the last step
  }
}

TEST(BatchPrefetcher, PassesTheThreadsErrorsOn) {
  const TokenDataset d = TokenDataset::from_text("too short", "t");
  MemoryTracker tracker;
  BatchPrefetcher pre(d, 1, {.batch = 1, .seq = 64, .per_step = 1, .first_row = 0, .rows = 1}, 1,
                      3, tracker);
  try {
    pre.next();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("'t' has 9 tokens"));
  }
}

TEST(BatchPrefetcher, StopsCleanlyBeforeTheLastStep) {
  const TokenDataset d = TokenDataset::default_corpus();
  MemoryTracker tracker;
  {
    BatchPrefetcher pre(d, 1, {.batch = 2, .seq = 8, .per_step = 2, .first_row = 0, .rows = 2}, 1,
                        1000000, tracker);
    pre.next();
  }  // destroyed with a step prepared and the thread waiting: joins, nothing leaks
  EXPECT_EQ(tracker.stats().current_total, 0);
}

}  // namespace
}  // namespace origami::data
