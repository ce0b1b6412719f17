// Origami's token files (data/token_file.h): the writer's bytes equal the format written by
// hand, the reader returns what was written, and every defect of a corrupted file is refused
// naming the file and the byte offset, including under random corruption.
#include <filesystem>
#include <functional>
#include <random>
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data_files.h"
#include "origami/core/error.h"
#include "origami/data/token_file.h"

namespace origami::data_test {
namespace {

using data::open_token_file;
using data::TokenFile;
using data::TokenFileWriter;
using ::testing::HasSubstr;

// The message of opening `prefix`, or "(opened)".
std::string refusal(const std::string& prefix) {
  try {
    open_token_file(prefix);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(opened)";
}

TEST(TokenFile, WriterMatchesTheFormatByteForByte) {
  const std::string a = temp_prefix("writer"), b = temp_prefix("hand");
  {
    TokenFileWriter w(a, 300, 0x1234);
    w.add_document(std::vector<std::int32_t>{5, 299, 0});
    w.add_document(std::vector<std::int32_t>{7});
    w.add_document(std::vector<std::int32_t>{1, 2});
    EXPECT_EQ(w.documents(), 3);
    EXPECT_EQ(w.tokens(), 6);
    w.finish();
  }
  write_origami_files(b, 2, 300, {0, 3, 4, 6}, le_all<std::uint16_t>({5, 299, 0, 7, 1, 2}));
  EXPECT_EQ(read_bytes(a + ".index"), read_bytes(b + ".index"));
  EXPECT_EQ(read_bytes(a + ".tokens"), read_bytes(b + ".tokens"));
  EXPECT_FALSE(std::filesystem::exists(a + ".tokens.tmp"));
  EXPECT_FALSE(std::filesystem::exists(a + ".index.tmp"));

  const TokenFile f = open_token_file(a);
  EXPECT_EQ(f.vocab_size, 300);
  EXPECT_EQ(f.tokenizer_id, 0x1234u);
  EXPECT_EQ(f.documents(), 3);
  EXPECT_EQ(f.document_offset(0), 0);
  EXPECT_EQ(f.document_offset(1), 3);
  EXPECT_EQ(f.document_offset(3), 6);
  ASSERT_EQ(f.tokens.count, 6);
  EXPECT_EQ(f.tokens.width, 2);
  std::vector<std::int32_t> got(6);
  f.tokens.copy(0, 6, got.data());
  EXPECT_EQ(got, (std::vector<std::int32_t>{5, 299, 0, 7, 1, 2}));
}

TEST(TokenFile, LargeVocabulariesUseUint32) {
  EXPECT_EQ(data::token_width(65536), 2);
  EXPECT_EQ(data::token_width(65537), 4);
  const std::string p = temp_prefix("u32");
  {
    TokenFileWriter w(p, 128256, 9);
    w.add_document(std::vector<std::int32_t>{128255, 65536, 3});
    w.finish();
  }
  EXPECT_EQ(read_bytes(p + ".tokens"), le_all<std::uint32_t>({128255, 65536, 3}));
  const TokenFile f = open_token_file(p);
  EXPECT_EQ(f.tokens.width, 4);
  EXPECT_EQ(f.tokens.at(0), 128255);
  EXPECT_EQ(f.tokens.at(1), 65536);
}

TEST(TokenFile, WriterRefusesBadDocumentsAndLeavesNothingWhenInterrupted) {
  const std::string p = temp_prefix("bad");
  {
    TokenFileWriter w(p, 10, 0);
    EXPECT_THROW(w.add_document(std::vector<std::int32_t>{}), ConfigError);
    EXPECT_THROW(w.add_document(std::vector<std::int32_t>{3, 10}), ConfigError);
    EXPECT_THROW(w.add_document(std::vector<std::int32_t>{-1}), ConfigError);
    EXPECT_THROW(w.finish(), ConfigError);  // no documents
    w.add_document(std::vector<std::int32_t>{1});
    // Destroyed without finish(): as an interrupted run.
  }
  EXPECT_FALSE(std::filesystem::exists(p + ".index"));
  EXPECT_FALSE(std::filesystem::exists(p + ".tokens"));
  EXPECT_FALSE(std::filesystem::exists(p + ".tokens.tmp"));
  EXPECT_THROW(TokenFileWriter(p, 0, 0), ConfigError);
}

// One defect per case: which file the message must name and at which byte offset.
struct Defect {
  std::string name;
  std::function<void(Bytes& index, Bytes& tokens)> apply;
  std::string file;  // "index" or "tokens"
  std::uint64_t offset;
  std::string says;
};

void put_u64(Bytes& b, std::size_t at, std::uint64_t v) { std::memcpy(b.data() + at, &v, 8); }
void put_u32(Bytes& b, std::size_t at, std::uint32_t v) { std::memcpy(b.data() + at, &v, 4); }

TEST(TokenFile, EachDefectIsRefusedNamingTheFileAndOffset) {
  // The valid pair: 3 documents {0, 3, 4, 6} of uint16 tokens, vocabulary 300.
  const Bytes tokens = le_all<std::uint16_t>({5, 299, 0, 7, 1, 2});
  const std::vector<Defect> defects = {
      {"short header", [](Bytes& ix, Bytes&) { ix.resize(20); }, "index", 20, "header"},
      {"magic", [](Bytes& ix, Bytes&) { ix[3] = 'X'; }, "index", 0, "magic"},
      {"version", [](Bytes& ix, Bytes&) { put_u32(ix, 8, 2); }, "index", 8, "version 2"},
      {"width", [](Bytes& ix, Bytes&) { put_u32(ix, 12, 3); }, "index", 12, "3 bytes per token"},
      {"vocab vs width", [](Bytes& ix, Bytes&) { put_u64(ix, 16, 70000); }, "index", 16,
       "vocabulary size 70000"},
      {"no documents", [](Bytes& ix, Bytes&) { put_u64(ix, 32, 0); }, "index", 32, "0 documents"},
      {"index truncated", [](Bytes& ix, Bytes&) { ix.resize(ix.size() - 8); }, "index", 72,
       "3 documents"},
      {"index cut mid-offset", [](Bytes& ix, Bytes&) { ix.resize(ix.size() - 3); }, "index", 77,
       "3 documents"},
      {"document count huge", [](Bytes& ix, Bytes&) { put_u64(ix, 32, ~0ull); }, "index", 80,
       "documents"},
      {"tokens truncated", [](Bytes&, Bytes& t) { t.resize(t.size() - 2); }, "tokens", 10,
       "truncated"},
      {"tokens odd size", [](Bytes&, Bytes& t) { t.resize(t.size() - 1); }, "tokens", 11,
       "truncated"},
      {"first offset", [](Bytes& ix, Bytes&) { put_u64(ix, 48, 1); }, "index", 48,
       "first offset is 1"},
      {"out of order", [](Bytes& ix, Bytes&) { put_u64(ix, 56, 5); }, "index", 64,
       "out of order"},
      {"zero-length document", [](Bytes& ix, Bytes&) { put_u64(ix, 64, 3); }, "index", 64,
       "zero-length document"},
      {"pointing outside", [](Bytes& ix, Bytes&) { put_u64(ix, 64, 9); }, "index", 64,
       "points past the 6 tokens"},
      {"last offset", [](Bytes& ix, Bytes&) { put_u64(ix, 40, 7); }, "tokens", 12, "7 tokens"},
      {"id >= vocabulary", [](Bytes&, Bytes& t) { t[8] = 44; t[9] = 1; }, "tokens", 8,
       "token id 300 (token 4)"},
  };
  for (const Defect& d : defects) {
    const std::string p = temp_prefix("defect");
    write_origami_files(p, 2, 300, {0, 3, 4, 6}, tokens);
    Bytes ix = read_bytes(p + ".index"), t = read_bytes(p + ".tokens");
    d.apply(ix, t);
    write_bytes(p + ".index", ix);
    write_bytes(p + ".tokens", t);
    const std::string m = refusal(p);
    EXPECT_THAT(m, HasSubstr("'" + p + "." + d.file + "'")) << d.name;
    EXPECT_THAT(m, HasSubstr(fmt::format("byte offset {}:", d.offset))) << d.name;
    EXPECT_THAT(m, HasSubstr(d.says)) << d.name;
  }
  // A missing half names the path.
  const std::string p = temp_prefix("missing");
  write_origami_files(p, 2, 300, {0, 3, 4, 6}, tokens);
  std::filesystem::remove(p + ".tokens");
  EXPECT_THAT(refusal(p), HasSubstr("cannot open '" + p + ".tokens'"));
}

// Random corruption (flipped bytes, truncation, extension) of a valid pair: every outcome is
// either a ConfigError naming a file and an offset, or a file whose invariants hold. Nothing
// else (no crash, no other exception, no id >= the vocabulary read back).
TEST(TokenFile, RandomCorruptionIsRefusedOrConsistent) {
  std::mt19937_64 rng(20261201);
  const std::string good = temp_prefix("good");
  {
    TokenFileWriter w(good, 50, 1);
    for (int d = 0; d < 7; ++d) {
      std::vector<std::int32_t> doc(static_cast<std::size_t>(1 + d * 3));
      for (auto& id : doc) id = static_cast<std::int32_t>(rng() % 50);
      w.add_document(doc);
    }
    w.finish();
  }
  const Bytes ix0 = read_bytes(good + ".index"), t0 = read_bytes(good + ".tokens");
  int refused = 0, opened = 0;
  const std::regex names_offset("token file '.*\\.(index|tokens)', byte offset [0-9]+: ");
  for (int trial = 0; trial < 1500; ++trial) {
    Bytes ix = ix0, t = t0;
    Bytes& target = rng() % 2 ? ix : t;
    switch (rng() % 4) {
      case 0:  // flip 1-3 bytes
        for (std::uint64_t k = 0, n = 1 + rng() % 3; k < n; ++k)
          target[rng() % target.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
        break;
      case 1:  // truncate
        target.resize(rng() % target.size());
        break;
      case 2:  // extend
        for (std::uint64_t k = 0, n = 1 + rng() % 9; k < n; ++k)
          target.push_back(static_cast<std::uint8_t>(rng()));
        break;
      default:  // one small value into a field or offset of the index
        if (ix.size() >= 16) ix[8 * (rng() % (ix.size() / 8))] = static_cast<std::uint8_t>(rng() % 64);
    }
    const std::string p = temp_prefix("fuzz");
    write_bytes(p + ".index", ix);
    write_bytes(p + ".tokens", t);
    try {
      const TokenFile f = open_token_file(p);
      ++opened;
      ASSERT_EQ(f.document_offset(0), 0);
      for (std::int64_t d = 0; d < f.documents(); ++d)
        ASSERT_LT(f.document_offset(d), f.document_offset(d + 1));
      ASSERT_EQ(f.document_offset(f.documents()), f.tokens.count);
      for (std::int64_t i = 0; i < f.tokens.count; ++i) {
        ASSERT_GE(f.tokens.at(i), 0);
        ASSERT_LT(f.tokens.at(i), f.vocab_size);
      }
    } catch (const ConfigError& e) {
      ++refused;
      ASSERT_TRUE(std::regex_search(e.what(), names_offset)) << e.what();
    }
    std::filesystem::remove(p + ".index");
    std::filesystem::remove(p + ".tokens");
  }
  EXPECT_GT(refused, 1000);  // nearly every corruption is detectable
  EXPECT_GT(opened, 0);      // a flipped token that stays below the vocabulary is valid data
}

}  // namespace
}  // namespace origami::data_test
