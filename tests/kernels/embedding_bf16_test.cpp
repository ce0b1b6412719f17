// The embedding gather into bf16 rows (embedding_forward_bf16): an exact row copy of the bf16
// table shard, zeros for ids of another shard; the same checks as the fp32 gather.
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "bf16_test_util.h"
#include "origami/core/error.h"
#include "origami/kernels/embedding.h"
#include "test_util.h"

namespace origami::kernels {
namespace {

TEST(EmbeddingBf16, GatherCopiesTheShardsRowsAndZeroesOthers) {
  std::mt19937 rng(141);
  const std::int64_t vocab = 37, h = 19, tokens = 53, first_row = 11, table_rows = 13;
  const auto table = testing::random_bf16(rng, table_rows * h);
  std::uniform_int_distribution<std::int32_t> id_dist(0, vocab - 1);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens));
  for (auto& id : ids) id = id_dist(rng);
  ids[0] = static_cast<std::int32_t>(first_row);  // both ends of the shard and just past it
  ids[1] = static_cast<std::int32_t>(first_row + table_rows - 1);
  ids[2] = static_cast<std::int32_t>(first_row + table_rows);
  std::vector<bf16> out(static_cast<std::size_t>(tokens * h), to_bf16(7.0f));
  embedding_forward_bf16(tokens, h, ids.data(), table.data(), first_row, table_rows, out.data());
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t row = ids[static_cast<std::size_t>(t)] - first_row;
    const bool in = row >= 0 && row < table_rows;
    for (std::int64_t j = 0; j < h; ++j) {
      const bf16 expect = in ? table[static_cast<std::size_t>(row * h + j)] : bf16{};
      ASSERT_EQ(out[static_cast<std::size_t>(t * h + j)].bits, expect.bits) << t << "," << j;
    }
  }
}

TEST(EmbeddingBf16, OneAndTwoThreadsAreBitwiseIdentical) {
  std::mt19937 rng(142);
  const std::int64_t vocab = 256, h = 256, tokens = 4099;
  const auto table = testing::random_bf16(rng, vocab * h);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens));
  for (std::size_t t = 0; t < ids.size(); ++t) ids[t] = static_cast<std::int32_t>((t * 7919) % 300);
  auto run = [&](int threads) {
    testing::ThreadCountScope scope(threads);
    std::vector<bf16> out(static_cast<std::size_t>(tokens * h));
    embedding_forward_bf16(tokens, h, ids.data(), table.data(), 0, vocab, out.data());
    return out;
  };
  EXPECT_TRUE(testing::bitwise_equal(run(1), run(2)));
}

TEST(EmbeddingBf16Checks, NegativeIdsAndSizes) {
  std::vector<bf16> table(8), out(8);
  const std::int32_t bad[] = {1, -3};
  EXPECT_THROW(embedding_forward_bf16(2, 4, bad, table.data(), 0, 2, out.data()), Error);
  EXPECT_THROW(embedding_forward_bf16(-1, 4, bad, table.data(), 0, 2, out.data()), Error);
  EXPECT_THROW(embedding_forward_bf16(1, 4, bad, table.data(), -1, 2, out.data()), Error);
  embedding_forward_bf16(0, 4, nullptr, table.data(), 0, 2, nullptr);
}

}  // namespace
}  // namespace origami::kernels
