#include "origami/kernels/embedding.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "origami/core/error.h"
#include "simd_targets.h"
#include "test_util.h"

namespace origami::kernels {
namespace {

using testing::random_floats;

// A table shard holding rows [first_row, first_row + rows) of a vocabulary of V.
struct Shard {
  std::int64_t V, first_row, rows, h, tokens;
};

std::vector<std::int32_t> random_ids(std::mt19937& rng, std::int64_t n, std::int64_t V) {
  std::uniform_int_distribution<std::int32_t> pick(0, std::int32_t(V - 1));
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (auto& id : ids) id = pick(rng);
  return ids;
}

// The kernel tests run on every SIMD target of the machine (simd_targets.h).
class Embedding : public testing::OnEverySimdTarget {};

TEST_P(Embedding, ForwardCopiesRowsInRangeAndZerosTheRest) {
  std::mt19937 rng(41);
  for (const Shard& s : {Shard{1, 0, 1, 1, 1}, Shard{17, 0, 17, 3, 33}, Shard{33, 11, 11, 17, 257},
                        Shard{257, 200, 57, 5, 3}}) {
    const auto table = random_floats(rng, s.rows * s.h);
    const auto ids = random_ids(rng, s.tokens, s.V);
    std::vector<float> out(static_cast<std::size_t>(s.tokens * s.h), 9.0f);  // overwritten, zeros included
    embedding_forward(s.tokens, s.h, ids.data(), table.data(), s.first_row, s.rows, out.data());
    for (std::int64_t t = 0; t < s.tokens; ++t) {
      const std::int64_t local = ids[static_cast<std::size_t>(t)] - s.first_row;
      const bool in = local >= 0 && local < s.rows;
      for (std::int64_t j = 0; j < s.h; ++j)
        ASSERT_EQ(out[static_cast<std::size_t>(t * s.h + j)], in ? table[static_cast<std::size_t>(local * s.h + j)] : 0.0f)
            << "token " << t << " id " << ids[static_cast<std::size_t>(t)];
    }
  }
}

TEST_P(Embedding, BackwardAddsRepeatedIdsAndSkipsOtherShards) {
  std::mt19937 rng(42);
  for (const Shard& s : {Shard{1, 0, 1, 1, 1}, Shard{5, 0, 5, 17, 257}, Shard{33, 11, 11, 33, 257},
                        Shard{257, 100, 57, 3, 17}}) {
    const auto ids = random_ids(rng, s.tokens, s.V);  // V small vs tokens: many repeats
    const auto dout = random_floats(rng, s.tokens * s.h);
    const auto dtable0 = random_floats(rng, s.rows * s.h);  // accumulate convention
    std::vector<double> ref(dtable0.begin(), dtable0.end());
    for (std::int64_t t = 0; t < s.tokens; ++t) {
      const std::int64_t local = ids[static_cast<std::size_t>(t)] - s.first_row;
      if (local < 0 || local >= s.rows) continue;
      for (std::int64_t j = 0; j < s.h; ++j)
        ref[static_cast<std::size_t>(local * s.h + j)] += dout[static_cast<std::size_t>(t * s.h + j)];
    }
    auto dtable = dtable0;
    embedding_backward(s.tokens, s.h, ids.data(), dout.data(), s.first_row, s.rows, dtable.data());
    EXPECT_TRUE(testing::RelClose(dtable, ref));
  }
}

TEST_P(Embedding, OneAndTwoThreadsAreBitwiseIdentical) {
  std::mt19937 rng(43);
  const std::int64_t V = 50, h = 200, tokens = 1001;
  const auto table = random_floats(rng, V * h);
  const auto ids = random_ids(rng, tokens, V);
  const auto dout = random_floats(rng, tokens * h);
  auto run = [&](int threads) {
    testing::ThreadCountScope scope(threads);
    std::vector<float> out(static_cast<std::size_t>(tokens * h)), dtable(static_cast<std::size_t>(V * h), 0.0f);
    embedding_forward(tokens, h, ids.data(), table.data(), 0, V, out.data());
    embedding_backward(tokens, h, ids.data(), dout.data(), 0, V, dtable.data());
    out.insert(out.end(), dtable.begin(), dtable.end());
    return out;
  };
  EXPECT_TRUE(testing::bitwise_equal(run(1), run(2)));
}

TEST(EmbeddingChecks, RejectsNegativeIdsAndRanges) {
  const std::vector<float> table(8, 1.0f);
  std::vector<float> out(8), dtable(8, 0.0f);
  const std::vector<std::int32_t> ids = {1, -1};
  EXPECT_THROW(embedding_forward(2, 4, ids.data(), table.data(), 0, 2, out.data()), Error);
  EXPECT_THROW(embedding_backward(2, 4, ids.data(), out.data(), 0, 2, dtable.data()), Error);
  const std::vector<std::int32_t> good = {1, 0};
  EXPECT_THROW(embedding_forward(2, 4, good.data(), table.data(), -1, 2, out.data()), Error);
  for (float v : dtable) EXPECT_EQ(v, 0.0f);  // nothing was added before the refusal
  embedding_forward(0, 4, nullptr, table.data(), 0, 2, nullptr);  // zero tokens: fine
  embedding_backward(0, 4, nullptr, nullptr, 0, 2, dtable.data());
}

ORIGAMI_ON_EVERY_SIMD_TARGET(Embedding);

}  // namespace
}  // namespace origami::kernels
