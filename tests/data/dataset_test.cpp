// TokenDataset over token files (train/data.h): format detection, blends by weight, the rows a
// rank reads, and the vocabulary check before training.
#include <cmath>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data_files.h"
#include "origami/core/error.h"
#include "origami/data/token_file.h"
#include "origami/data/dataset.h"

namespace origami::data_test {
namespace {

using data::Batch;
using data::TokenDataset;
using ::testing::HasSubstr;

std::vector<std::int32_t> row(const Tensor& t, std::int64_t b) {
  const std::int64_t S = t.dim(1);
  const std::int32_t* p = t.data<std::int32_t>() + b * S;
  return {p, p + S};
}

// An Origami token file of `n` tokens, token i = (i * 7 + salt) % vocab, in documents of 10.
std::string origami_file(std::int64_t n, std::int64_t vocab, int salt) {
  const std::string p = temp_prefix("ds");
  data::TokenFileWriter w(p, vocab, 0);
  std::vector<std::int32_t> doc;
  for (std::int64_t i = 0; i < n; ++i) {
    doc.push_back(static_cast<std::int32_t>((i * 7 + salt) % vocab));
    if (doc.size() == 10 || i + 1 == n) {
      w.add_document(doc);
      doc.clear();
    }
  }
  w.finish();
  return p;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenDataset, OpensEachFormatByWhatIsOnDisk) {
  const std::string ours = origami_file(100, 1000, 0);
  for (const std::string& spec : {ours, ours + ".index", ours + ".tokens"}) {
    const TokenDataset d = TokenDataset::open(spec);
    ASSERT_EQ(d.sources().size(), 1u);
    EXPECT_EQ(d.sources()[0].format, "Origami token file (uint16)") << spec;
    EXPECT_EQ(d.sources()[0].documents, 10);
    EXPECT_EQ(d.size(), 100);
    EXPECT_EQ(d.token(13), 13 * 7 % 1000);
  }
  const std::string meg = temp_prefix("meg");
  write_bytes(meg + ".bin", le_all<std::uint16_t>({1, 2, 3, 4, 5}));
  write_bytes(meg + ".idx", megatron_index(8, {2, 3}, {0, 4}, {0, 1, 2}));
  for (const std::string& spec : {meg, meg + ".bin", meg + ".idx"}) {
    const TokenDataset d = TokenDataset::open(spec);
    EXPECT_EQ(d.sources()[0].format, "Megatron indexed (uint16)") << spec;
    EXPECT_EQ(d.token(4), 5);
  }
  const std::string flat = temp_prefix("flat") + ".bin";
  write_bytes(flat, le_all<std::uint32_t>({70000, 9}));
  EXPECT_EQ(TokenDataset::open(flat, data::data_options("uint32", "random")).token(0), 70000);
  EXPECT_EQ(TokenDataset::open(flat, data::data_options("uint16", "random")).size(), 4);
  EXPECT_THROW(data::data_options("int8", "random"), ConfigError);
  EXPECT_THROW(data::data_options("uint16", "sorted"), ConfigError);
  const std::string text = temp_prefix("text") + ".txt";
  write_bytes(text, {'h', 'i', '!'});
  EXPECT_EQ(TokenDataset::open(text).sources()[0].format, "text (byte tokens)");
  EXPECT_EQ(TokenDataset::open(text).token(2), '!');
  EXPECT_EQ(TokenDataset::open("").label(), "built-in corpus");
}

TEST(TokenDataset, BlendsSourcesByWeight) {
  const std::string a = origami_file(500, 1000, 0), b = origami_file(300, 1000, 1);
  const TokenDataset d = TokenDataset::open(a + ":3," + b + ":1");
  ASSERT_EQ(d.sources().size(), 2u);
  EXPECT_EQ(d.sources()[0].weight, 3);
  EXPECT_EQ(d.size(), 800);
  EXPECT_THAT(d.label(), HasSubstr(a + " (weight 0.75) + " + b + " (weight 0.25)"));
  MemoryTracker tracker;
  const std::int64_t B = 8, S = 16;
  int from_a = 0, rows = 0;
  for (std::int64_t step = 0; step < 500; ++step) {
    const Batch batch = d.batch(5, step, B, S, tracker);
    for (std::int64_t r = 0; r < B; ++r, ++rows) {
      const data::Window w = d.window(5, step, B, r, S);
      const data::TokenView& src = d.sources()[static_cast<std::size_t>(w.source)].tokens;
      ASSERT_LE(w.start + S + 1, src.count);
      from_a += w.source == 0;
      const auto in = row(batch.input_ids, r), lab = row(batch.labels, r);
      for (std::int64_t s = 0; s < S; ++s) {
        ASSERT_EQ(in[static_cast<std::size_t>(s)], src.at(w.start + s));
        ASSERT_EQ(lab[static_cast<std::size_t>(s)], src.at(w.start + s + 1));
      }
    }
  }
  // 4000 draws of p = 0.75: the standard deviation of the share is 0.007.
  EXPECT_NEAR(static_cast<double>(from_a) / rows, 0.75, 0.03);
  // The same spec and seed: the same windows; another seed: others.
  const TokenDataset again = TokenDataset::open(a + ":3," + b + ":1");
  EXPECT_EQ(row(again.batch(5, 17, B, S, tracker).input_ids, 3),
            row(d.batch(5, 17, B, S, tracker).input_ids, 3));
  EXPECT_NE(row(d.batch(6, 17, B, S, tracker).input_ids, 3),
            row(d.batch(5, 17, B, S, tracker).input_ids, 3));
}

TEST(TokenDataset, BlendSpecErrorsNameTheItem) {
  const std::string a = origami_file(50, 100, 0);
  EXPECT_THAT(error_of([&] { TokenDataset::open(a + ":0"); }), HasSubstr("weight of '" + a + "' is 0"));
  EXPECT_THAT(error_of([&] { TokenDataset::open(a + ":-1," + a); }), HasSubstr("above 0"));
  EXPECT_THAT(error_of([&] { TokenDataset::open(a + ",," + a); }), HasSubstr("an empty item"));
  EXPECT_THAT(error_of([&] { TokenDataset::open(a + ",/no/such/file"); }),
              HasSubstr("cannot open '/no/such/file'"));
  // A path holding ':' or ',' is taken as given when it is a file.
  const std::string odd = temp_prefix("odd") + "a:2,b.txt";
  write_bytes(odd, {'x', 'y', 'z'});
  EXPECT_EQ(TokenDataset::open(odd).size(), 3);
}

TEST(TokenDataset, RowsAreTheSliceOfTheWholeBatch) {
  const std::string a = origami_file(400, 1000, 0), b = origami_file(200, 1000, 3);
  const TokenDataset d = TokenDataset::open(a + ":1," + b + ":2");
  MemoryTracker tracker;
  const std::int64_t B = 6, S = 12;
  for (std::int64_t step : {0, 3, 99}) {
    const Batch whole = d.batch(9, step, B, S, tracker);
    for (std::int64_t first : {0, 2, 4}) {
      const Batch part = d.rows(9, step, B, first, 2, S, tracker);
      ASSERT_EQ(part.input_ids.shape(), (Shape{2, S}));
      for (std::int64_t r = 0; r < 2; ++r) {
        EXPECT_EQ(row(part.input_ids, r), row(whole.input_ids, first + r));
        EXPECT_EQ(row(part.labels, r), row(whole.labels, first + r));
      }
    }
  }
  EXPECT_THROW(d.rows(9, 0, B, 5, 2, S, tracker), Error);
}

TEST(TokenDataset, VocabularyAndLengthAreCheckedBeforeTraining) {
  // The index declares 1000 ids though the data uses fewer: refused against 999, naming both.
  const std::string a = origami_file(100, 1000, 0);
  EXPECT_NO_THROW(data::open_for_training(a, {}, 1000, 32));
  const std::string m = error_of([&] { data::open_for_training(a, {}, 999, 32); });
  EXPECT_THAT(m, HasSubstr("vocabulary of 1000"));
  EXPECT_THAT(m, HasSubstr("vocab_size is 999"));
  // A flat file has no declared vocabulary: its largest id and where it is.
  const std::string flat = temp_prefix("big") + ".bin";
  std::vector<std::uint16_t> ids(40, 3);
  ids[21] = 300;
  write_bytes(flat, le_all(ids));
  const std::string f = error_of([&] { data::open_for_training(flat, {}, 256, 8); });
  EXPECT_THAT(f, HasSubstr("token id 300 (at token 21, byte offset 42)"));
  EXPECT_THAT(f, HasSubstr("vocab_size is 256"));
  // Each source of a blend must hold a window of seq + 1 tokens.
  const std::string s = error_of([&] { data::open_for_training(a + "," + flat, {}, 1000, 40); });
  EXPECT_THAT(s, HasSubstr("(" + flat + ") has 40 tokens, fewer than --seq + 1 = 41"));
}

}  // namespace
}  // namespace origami::data_test
