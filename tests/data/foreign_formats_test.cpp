// The formats users already have (data/foreign_token_files.h), from fixtures written byte by
// byte from their specs: nanoGPT's flat uint16 / uint32 files, llm.c's .bin with its 256-int32
// header (both magics), and Megatron's MMIDIDX indexed dataset; and each one's defects refused
// naming the file and the byte offset.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data_files.h"
#include "origami/core/error.h"
#include "origami/data/foreign_token_files.h"

namespace origami::data_test {
namespace {

using data::ForeignTokenFile;
using ::testing::HasSubstr;

std::vector<std::int32_t> all_tokens(const ForeignTokenFile& f) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(f.tokens.count));
  f.tokens.copy(0, f.tokens.count, v.data());
  return v;
}

template <typename Open>
std::string refusal(Open open) {
  try {
    open();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(opened)";
}

Bytes llmc_header(std::int32_t magic, std::int32_t version, std::int32_t count) {
  std::vector<std::int32_t> h(256, 0);
  h[0] = magic;
  h[1] = version;
  h[2] = count;
  return le_all(h);
}

Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(FlatTokenFile, ReadsRawUint16AndUint32) {
  const std::string p16 = temp_prefix("flat16") + ".bin", p32 = temp_prefix("flat32") + ".bin";
  write_bytes(p16, le_all<std::uint16_t>({50256, 1, 65535, 7}));
  write_bytes(p32, le_all<std::uint32_t>({128000, 2, 3}));
  const ForeignTokenFile a = data::open_flat_token_file(p16, 2);
  EXPECT_EQ(a.format, "flat uint16");
  EXPECT_EQ(all_tokens(a), (std::vector<std::int32_t>{50256, 1, 65535, 7}));
  EXPECT_EQ(a.largest.id, 65535u);
  EXPECT_EQ(a.largest.at, 2);
  const ForeignTokenFile b = data::open_flat_token_file(p32, 4);
  EXPECT_EQ(all_tokens(b), (std::vector<std::int32_t>{128000, 2, 3}));
  EXPECT_EQ(b.largest.id, 128000u);
  // The same bytes as uint32 of a file of 4 uint16: two tokens.
  EXPECT_EQ(data::open_flat_token_file(p16, 4).tokens.count, 2);
  // Defects: a size that is no whole number of tokens, an empty file.
  write_bytes(p32, cat(le_all<std::uint32_t>({1, 2}), {9, 9}));
  const std::string m = refusal([&] { data::open_flat_token_file(p32, 4); });
  EXPECT_THAT(m, HasSubstr("'" + p32 + "', byte offset 8:"));
  write_bytes(p16, {});
  EXPECT_THAT(refusal([&] { data::open_flat_token_file(p16, 2); }),
              HasSubstr("'" + p16 + "', byte offset 0: the file holds no tokens"));
  EXPECT_THROW(data::open_flat_token_file(p16, 3), ConfigError);
}

TEST(FlatTokenFile, ReadsLlmcHeaders) {
  const std::string gpt2 = temp_prefix("llmc") + ".bin", llama3 = temp_prefix("llmc3") + ".bin";
  write_bytes(gpt2, cat(llmc_header(20240520, 1, 3), le_all<std::uint16_t>({50256, 464, 3290})));
  write_bytes(llama3, cat(llmc_header(20240801, 7, 2), le_all<std::uint32_t>({128000, 791})));
  // The header decides the width whatever --data-dtype says.
  const ForeignTokenFile a = data::open_flat_token_file(gpt2, 4);
  EXPECT_EQ(a.format, "llm.c .bin (uint16)");
  EXPECT_EQ(all_tokens(a), (std::vector<std::int32_t>{50256, 464, 3290}));
  const ForeignTokenFile b = data::open_flat_token_file(llama3, 2);
  EXPECT_EQ(b.format, "llm.c .bin (uint32)");
  EXPECT_EQ(all_tokens(b), (std::vector<std::int32_t>{128000, 791}));

  // Defects: a wrong version, a count that disagrees with the size, a cut header.
  write_bytes(gpt2, cat(llmc_header(20240520, 2, 3), le_all<std::uint16_t>({1, 2, 3})));
  EXPECT_THAT(refusal([&] { data::open_flat_token_file(gpt2, 2); }),
              HasSubstr("'" + gpt2 + "', byte offset 4: llm.c magic 20240520 with version 2"));
  write_bytes(gpt2, cat(llmc_header(20240520, 1, 4), le_all<std::uint16_t>({1, 2, 3})));
  EXPECT_THAT(refusal([&] { data::open_flat_token_file(gpt2, 2); }),
              HasSubstr("'" + gpt2 + "', byte offset 8: the header says 4 tokens"));
  Bytes cut = llmc_header(20240520, 1, 0);
  cut.resize(100);
  write_bytes(gpt2, cut);
  EXPECT_THAT(refusal([&] { data::open_flat_token_file(gpt2, 2); }),
              HasSubstr("'" + gpt2 + "', byte offset 100: the llm.c header"));
}

class Megatron : public ::testing::Test {
 protected:
  // Two documents: [sequence 0, sequence 1] and [sequence 2], lengths 3, 2, 4 (uint16).
  void write_valid() {
    write_bytes(prefix_ + ".bin", le_all<std::uint16_t>({10, 11, 12, 20, 21, 30, 31, 32, 33}));
    write_bytes(prefix_ + ".idx", megatron_index(8, {3, 2, 4}, {0, 6, 10}, {0, 2, 3}));
  }
  std::string refused() {
    return refusal([&] { data::open_megatron_dataset(prefix_); });
  }
  std::string prefix_ = temp_prefix("megatron");
};

TEST_F(Megatron, ReadsTheIndexedDataset) {
  write_valid();
  ASSERT_TRUE(data::is_megatron_prefix(prefix_));
  const ForeignTokenFile f = data::open_megatron_dataset(prefix_);
  EXPECT_EQ(f.format, "Megatron indexed (uint16)");
  EXPECT_EQ(f.documents, 2);
  EXPECT_EQ(f.document_offsets, (std::vector<std::int64_t>{0, 5, 9}));  // for document masking
  EXPECT_EQ(all_tokens(f), (std::vector<std::int32_t>{10, 11, 12, 20, 21, 30, 31, 32, 33}));
  EXPECT_EQ(f.largest.id, 33u);
  EXPECT_EQ(f.largest.at, 8);
  // int32 tokens (code 4), and the optional sequence modes after the document indices.
  write_bytes(prefix_ + ".bin", le_all<std::int32_t>({70000, 1, 2}));
  write_bytes(prefix_ + ".idx",
              cat(megatron_index(4, {1, 2}, {0, 4}, {0, 1, 2}), Bytes{0, 0}));
  const ForeignTokenFile g = data::open_megatron_dataset(prefix_);
  EXPECT_EQ(g.format, "Megatron indexed (int32)");
  EXPECT_EQ(all_tokens(g), (std::vector<std::int32_t>{70000, 1, 2}));
}

TEST_F(Megatron, EachDefectIsRefusedNamingTheFileAndOffset) {
  const std::string idx = "'" + prefix_ + ".idx', byte offset ";
  const std::string bin = "'" + prefix_ + ".bin', byte offset ";
  // Header at 0..33; lengths at 34 (3 x 4 bytes), pointers at 46 (3 x 8), documents at 70.
  struct Case {
    std::string name;
    Bytes index;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"magic", [] { auto b = megatron_index(8, {3, 2, 4}, {0, 6, 10}, {0, 2, 3}); b[1] = 'X'; return b; }(),
       idx + "0: no 'MMIDIDX' magic"},
      {"version", [] { auto b = megatron_index(8, {3, 2, 4}, {0, 6, 10}, {0, 2, 3}); b[9] = 2; return b; }(),
       idx + "9: version 2"},
      {"dtype", megatron_index(6, {3, 2, 4}, {0, 6, 10}, {0, 2, 3}), idx + "17: dtype code 6"},
      {"truncated", [] { auto b = megatron_index(8, {3, 2, 4}, {0, 6, 10}, {0, 2, 3}); b.resize(80); return b; }(),
       idx + "80: 3 sequences and 3 document indices make a file of 94 bytes"},
      {"cut header", [] { auto b = megatron_index(8, {3, 2, 4}, {0, 6, 10}, {0, 2, 3}); b.resize(20); return b; }(),
       idx + "20: the file ends inside the 34-byte header"},
      {"zero-length", megatron_index(8, {3, 0, 6}, {0, 6, 6}, {0, 2, 3}), idx + "38: sequence 1 has length 0 (a zero-length document)"},
      {"gap", megatron_index(8, {3, 2, 4}, {0, 8, 12}, {0, 2, 3}), idx + "54: sequence 1 starts at byte 8"},
      {"outside", megatron_index(8, {3, 2, 5}, {0, 6, 10}, {0, 2, 3}), idx + "42: sequence 2 ends at byte 20, past the end"},
      {"short", megatron_index(8, {3, 2, 3}, {0, 6, 10}, {0, 2, 3}), bin + "16: the index covers 16 bytes but the file has 18"},
      {"documents out of order", megatron_index(8, {3, 2, 4}, {0, 6, 10}, {0, 3, 2}), idx + "86: document index 2 is 2"},
      {"documents past the sequences", megatron_index(8, {3, 2, 4}, {0, 6, 10}, {0, 4, 3}), idx + "78: document index 1 is 4"},
      {"last document", megatron_index(8, {3, 2, 4}, {0, 6, 10}, {0, 2}), idx + "78: the last document index is 2"},
      {"huge count", [] { auto b = megatron_index(8, {3, 2, 4}, {0, 6, 10}, {0, 2, 3}); b[25] = 0x7f; return b; }(),
       idx + "18: "},
  };
  for (const Case& c : cases) {
    write_valid();
    write_bytes(prefix_ + ".idx", c.index);
    EXPECT_THAT(refused(), HasSubstr(c.says)) << c.name;
  }
  // A negative int32 token.
  write_bytes(prefix_ + ".bin", le_all<std::int32_t>({5, -3}));
  write_bytes(prefix_ + ".idx", megatron_index(4, {2}, {0}, {0, 1}));
  EXPECT_THAT(refused(), HasSubstr(bin + "4: token 1 is negative (-3)"));
}

}  // namespace
}  // namespace origami::data_test
