// The epoch order (train/data.h, data/permutation.h): the permutation is one on every size,
// each window is seen once per epoch in an order that changes with the epoch and the seed, and
// a blend deals each block's rows to its sources by weight exactly.
#include <algorithm>
#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data_files.h"
#include "origami/core/error.h"
#include "origami/data/permutation.h"
#include "origami/data/token_file.h"
#include "origami/data/dataset.h"

namespace origami::data_test {
namespace {

using data::DataOrder;
using data::TokenDataset;

TEST(Permutation, IsAPermutationOfEverySize) {
  const rng::Key k1 = rng::make_key(1, "test"), k2 = rng::make_key(2, "test");
  for (const std::uint64_t n : {1, 2, 3, 4, 5, 16, 17, 100, 1000, 4096, 5003}) {
    std::vector<std::uint64_t> a(n), b(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      a[i] = data::permute(i, n, k1);
      b[i] = data::permute(i, n, k2);
    }
    std::vector<std::uint64_t> sorted = a;
    std::sort(sorted.begin(), sorted.end());
    for (std::uint64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i) << "n " << n;
    if (n >= 16) {
      EXPECT_NE(a, b) << "n " << n;  // another key, another order
      std::uint64_t fixed = 0;
      for (std::uint64_t i = 0; i < n; ++i) fixed += a[i] == i;
      EXPECT_LT(fixed, n / 4 + 2) << "n " << n;  // not near the identity
    }
  }
  EXPECT_THROW(data::permute(5, 5, k1), Error);
}

std::string token_file(std::int64_t n, int salt) {
  const std::string p = temp_prefix("epoch");
  data::TokenFileWriter w(p, 1 << 16, 0);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 13 + salt) % 65536);
  w.add_document(ids);
  w.finish();
  return p;
}

TEST(EpochOrder, EachWindowOncePerEpochInANewOrder) {
  const std::int64_t S = 10, N = 377;  // M = floor(376 / 10) = 37 windows
  const TokenDataset d = TokenDataset::open(token_file(N, 0), {.order = DataOrder::Epoch});
  const std::int64_t M = 37, B = 4;
  std::vector<std::int64_t> starts;
  for (std::int64_t r = 0; r < 3 * M; ++r) starts.push_back(d.window(3, r / B, B, r % B, S).start);
  std::vector<std::vector<std::int64_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    std::vector<std::int64_t> v(starts.begin() + e * M, starts.begin() + (e + 1) * M);
    epochs.push_back(v);
    std::sort(v.begin(), v.end());
    for (std::int64_t k = 0; k < M; ++k) ASSERT_EQ(v[static_cast<std::size_t>(k)], k * S) << "epoch " << e;
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
  // The last window's label is the file's last usable token: nothing is read past the end.
  EXPECT_LE((M - 1) * S + S + 1, N);
  // Another seed: another order. The random order: windows at any offset.
  EXPECT_NE(d.window(4, 0, B, 0, S).start + d.window(4, 0, B, 1, S).start * 1000,
            d.window(3, 0, B, 0, S).start + d.window(3, 0, B, 1, S).start * 1000);
  // The batch holds those windows.
  MemoryTracker tracker;
  const data::Batch batch = d.batch(3, 2, B, S, tracker);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t start = d.window(3, 2, B, b, S).start;
    for (std::int64_t s = 0; s < S; ++s) {
      ASSERT_EQ(batch.input_ids.data<std::int32_t>()[b * S + s], d.token(start + s));
      ASSERT_EQ(batch.labels.data<std::int32_t>()[b * S + s], d.token(start + s + 1));
    }
  }
}

TEST(EpochOrder, BlendDealsEachBlockByWeight) {
  const std::int64_t S = 8;
  const std::string a = token_file(2001, 0), b = token_file(801, 5);  // 250 and 100 windows
  const TokenDataset d =
      TokenDataset::open(a + ":0.7," + b + ":0.3", {.order = DataOrder::Epoch});
  // Block of 4096 rows: 0.7 * 4096 = 2867.2 -> 2867, 1228.8 -> 1229 (the larger remainder).
  const std::int64_t B = 16, K = data::kBlendBlock;
  std::map<int, std::int64_t> per_source;
  std::map<int, std::map<std::int64_t, int>> visits;  // source -> window start -> times
  for (std::int64_t r = 0; r < K; ++r) {
    const data::Window w = d.window(9, r / B, B, r % B, S);
    ++per_source[w.source];
    ++visits[w.source][w.start];
  }
  EXPECT_EQ(per_source[0], 2867);
  EXPECT_EQ(per_source[1], 1229);
  // A block holds samples 0 .. n_i - 1 of each source: 2867 = 11 epochs of 250 windows + 117,
  // 1229 = 12 epochs of 100 + 29. So every window is seen 11 or 12 (12 or 13) times, and
  // exactly 117 (29) of them once more.
  for (const auto& [source, times] : visits) {
    const int M = source == 0 ? 250 : 100, full = source == 0 ? 11 : 12;
    const int extra = source == 0 ? 117 : 29;
    ASSERT_EQ(std::ssize(times), M) << "source " << source;
    int more = 0;
    for (const auto& [start, n] : times) {
      ASSERT_EQ(start % S, 0);
      ASSERT_TRUE(n == full || n == full + 1) << "window " << start << " seen " << n;
      more += n == full + 1;
    }
    EXPECT_EQ(more, extra) << "source " << source;
  }
  // A weight too small to earn a row of a block is refused.
  try {
    TokenDataset::open(a + ":10000," + b + ":1", {.order = DataOrder::Epoch});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("earns no row"));
  }
  EXPECT_NO_THROW(TokenDataset::open(a + ":10000," + b + ":1"));  // the random order draws it
}

}  // namespace
}  // namespace origami::data_test
