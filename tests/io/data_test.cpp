// Byte tokenizer, token dataset and deterministic batches.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "origami/core/error.h"
#include "origami/data/dataset.h"

namespace origami::data {
namespace {

using ::testing::HasSubstr;

std::vector<std::int32_t> row(const Tensor& t, std::int64_t b) {
  const std::int64_t S = t.dim(1);
  const std::int32_t* p = t.data<std::int32_t>() + b * S;
  return {p, p + S};
}

TEST(ByteTokenizer, RoundTripsEveryByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  const auto ids = ByteTokenizer::encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int c = 0; c < 256; ++c) EXPECT_EQ(ids[static_cast<std::size_t>(c)], c);
  EXPECT_EQ(ByteTokenizer::decode(ids), all);
  EXPECT_TRUE(ByteTokenizer::encode("").empty());
  const std::vector<std::int32_t> bad = {65, 256};
  EXPECT_THROW(ByteTokenizer::decode(bad), Error);
  const std::vector<std::int32_t> neg = {-1};
  EXPECT_THROW(ByteTokenizer::decode(neg), Error);
}

TEST(TokenDataset, DefaultCorpusIsSeveralKilobytesOfText) {
  const TokenDataset d = TokenDataset::default_corpus();
  EXPECT_GT(d.size(), 4000);
  for (std::int64_t i = 0; i < d.size(); ++i) {
    const std::int32_t t = d.token(i);
    ASSERT_TRUE(t == '\n' || (t >= 32 && t < 127)) << "unexpected byte " << t;
  }
  EXPECT_NO_THROW(d.check_vocab(256));
  EXPECT_NO_THROW(d.check_vocab(128));  // plain ASCII
}

TEST(TokenDataset, FileErrorsNameThePath) {
  const std::string path = ::testing::TempDir() + "origami_data_test.txt";
  std::remove(path.c_str());
  try {
    TokenDataset::from_file(path);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot open"));
    EXPECT_THAT(e.what(), HasSubstr(path));
  }
  { std::ofstream out(path); }
  try {
    TokenDataset::from_file(path);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("empty"));
    EXPECT_THAT(e.what(), HasSubstr(path));
  }
  {
    std::ofstream out(path, std::ios::binary);
    out << "ab\xff\n";
  }
  const TokenDataset d = TokenDataset::from_file(path);
  ASSERT_EQ(d.size(), 4);
  EXPECT_EQ((std::vector<std::int32_t>{d.token(0), d.token(1), d.token(2), d.token(3)}),
            (std::vector<std::int32_t>{'a', 'b', 255, '\n'}));
  EXPECT_EQ(d.label(), path);
  std::remove(path.c_str());
  EXPECT_THROW(TokenDataset::from_text("", "x"), ConfigError);
}

TEST(TokenDataset, ChecksTokensAgainstTheVocabulary) {
  const TokenDataset d = TokenDataset::from_text("abc\xc8z", "t");  // 0xc8 = 200
  EXPECT_NO_THROW(d.check_vocab(201));
  try {
    d.check_vocab(200);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("token id 200"));
    EXPECT_THAT(e.what(), HasSubstr("at token 3"));
    EXPECT_THAT(e.what(), HasSubstr("vocab_size is 200"));
  }
}

TEST(TokenDataset, BatchesAreShiftedWindowsOfTheData) {
  const TokenDataset d = TokenDataset::default_corpus();
  MemoryTracker tracker;
  const std::int64_t B = 3, S = 37;
  for (std::int64_t step : {0, 1, 17, 1000003}) {
    const Batch batch = d.batch(42, step, B, S, tracker);
    ASSERT_EQ(batch.input_ids.shape(), (Shape{B, S}));
    ASSERT_EQ(batch.labels.shape(), (Shape{B, S}));
    EXPECT_EQ(batch.input_ids.dtype(), DType::I32);
    EXPECT_EQ(batch.labels.dtype(), DType::I32);
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t start = d.window_start(42, step, B, b, S);
      ASSERT_GE(start, 0);
      ASSERT_LE(start + S + 1, d.size());
      const auto in = row(batch.input_ids, b), lab = row(batch.labels, b);
      for (std::int64_t s = 0; s < S; ++s) {
        EXPECT_EQ(in[static_cast<std::size_t>(s)], d.token(start + s));
        EXPECT_EQ(lab[static_cast<std::size_t>(s)],
                  d.token(start + s + 1));
      }
    }
  }
}

TEST(TokenDataset, BatchesDependOnlyOnSeedAndStep) {
  const TokenDataset d = TokenDataset::default_corpus();
  MemoryTracker tracker;
  const std::int64_t B = 2, S = 64;
  const Batch a = d.batch(7, 5, B, S, tracker);
  const Batch again = d.batch(7, 5, B, S, tracker);
  const Batch other_step = d.batch(7, 6, B, S, tracker);
  const Batch other_seed = d.batch(8, 5, B, S, tracker);
  EXPECT_EQ(row(a.input_ids, 0), row(again.input_ids, 0));
  EXPECT_EQ(row(a.input_ids, 1), row(again.input_ids, 1));
  EXPECT_NE(row(a.input_ids, 0), row(other_step.input_ids, 0));
  EXPECT_NE(row(a.input_ids, 0), row(other_seed.input_ids, 0));
  EXPECT_NE(row(a.input_ids, 0), row(a.input_ids, 1));

  // A sampler resumed at step 3 continues with exactly the batches of an uninterrupted run.
  BatchSampler full(d, 7), resumed(d, 7, 3);
  std::vector<std::vector<std::int32_t>> seen;
  for (int i = 0; i < 6; ++i) seen.push_back(row(full.next_batch(B, S, tracker).input_ids, 1));
  EXPECT_EQ(full.step(), 6);
  for (int i = 3; i < 6; ++i)
    EXPECT_EQ(row(resumed.next_batch(B, S, tracker).input_ids, 1),
              seen[static_cast<std::size_t>(i)]);
  EXPECT_EQ(row(d.batch(7, 4, B, S, tracker).input_ids, 1), seen[4]);
}

TEST(TokenDataset, WindowStartsCoverTheDataUniformly) {
  // 1000 tokens, S = 99: 901 possible starts. 9010 draws in 4 bins: each bin expects ~2252;
  // the draws are deterministic, so this cannot flake; a bias of a few percent would fail.
  const TokenDataset d = TokenDataset::from_text(std::string(1000, 'x'), "x");
  const std::int64_t S = 99, starts = 1000 - S;
  std::vector<int> bins(4, 0);
  std::int64_t lo = starts, hi = -1;
  for (std::int64_t step = 0; step < 4505; ++step)
    for (std::int64_t b = 0; b < 2; ++b) {
      const std::int64_t s = d.window_start(1, step, 2, b, S);
      ASSERT_GE(s, 0);
      ASSERT_LT(s, starts);
      lo = std::min(lo, s);
      hi = std::max(hi, s);
      ++bins[static_cast<std::size_t>(s * 4 / starts)];
    }
  EXPECT_LE(lo, 3);
  EXPECT_GE(hi, starts - 4);
  for (int count : bins) {
    EXPECT_GT(count, 2252 * 0.93);
    EXPECT_LT(count, 2252 * 1.07);
  }
}

TEST(TokenDataset, RefusesSequencesLongerThanTheData) {
  const TokenDataset d = TokenDataset::from_text("abcdefgh", "eight");
  MemoryTracker tracker;
  // S + 1 = 8 tokens: the only window is the whole text.
  const Batch b = d.batch(1, 0, 2, 7, tracker);
  EXPECT_EQ(row(b.input_ids, 0), (std::vector<std::int32_t>{'a', 'b', 'c', 'd', 'e', 'f', 'g'}));
  EXPECT_EQ(row(b.labels, 1), (std::vector<std::int32_t>{'b', 'c', 'd', 'e', 'f', 'g', 'h'}));
  // S = 1: single-token sequences.
  const Batch one = d.batch(1, 3, 1, 1, tracker);
  EXPECT_EQ(one.labels.data<std::int32_t>()[0], one.input_ids.data<std::int32_t>()[0] + 1);
  MemoryTracker fresh;
  try {
    d.batch(1, 0, 1, 8, fresh);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("has 8 tokens"));
    EXPECT_THAT(e.what(), HasSubstr("needs at least 9"));
  }
  EXPECT_EQ(fresh.peak_total(), 0);  // refused before allocating
  EXPECT_THROW(d.batch(1, 0, 0, 4, tracker), ConfigError);
  EXPECT_THROW(d.batch(1, 0, 2, 0, tracker), ConfigError);
}

}  // namespace
}  // namespace origami::data
