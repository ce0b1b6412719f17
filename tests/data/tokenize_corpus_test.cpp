// `tokenize --input --out` (data/tokenize_corpus.h): documents of .txt (blank-line separated)
// and .jsonl ("text" per line), the eos after each, the token width, and bad lines refused
// naming the line and offset.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data_files.h"
#include "origami/core/error.h"
#include "origami/data/token_file.h"
#include "origami/data/tokenize_corpus.h"

namespace origami::data_test {
namespace {

using ::testing::HasSubstr;

// A tokenizer with an eos and a vocabulary beyond uint16: byte c is id 1000 + c, eos 69999.
class WideTokenizer final : public tokenizer::Tokenizer {
 public:
  WideTokenizer() { special_.eos = 69999; }
  std::string kind() const override { return "test"; }
  std::int64_t vocab_size() const override { return 70000; }
  std::vector<std::int32_t> encode(std::string_view text, bool) const override {
    std::vector<std::int32_t> ids;
    for (const char c : text) ids.push_back(1000 + static_cast<unsigned char>(c));
    return ids;
  }
  std::string decode(std::span<const std::int32_t>, bool) const override { return {}; }
};

std::vector<std::vector<std::int32_t>> documents(const std::string& prefix) {
  const data::TokenFile f = data::open_token_file(prefix);
  std::vector<std::vector<std::int32_t>> docs;
  for (std::int64_t d = 0; d < f.documents(); ++d) {
    std::vector<std::int32_t> ids(
        static_cast<std::size_t>(f.document_offset(d + 1) - f.document_offset(d)));
    f.tokens.copy(f.document_offset(d), std::ssize(ids), ids.data());
    docs.push_back(ids);
  }
  return docs;
}

std::vector<std::int32_t> wide(const std::string& text) {
  std::vector<std::int32_t> ids = WideTokenizer().encode(text, false);
  ids.push_back(69999);
  return ids;
}

void write_text(const std::string& path, const std::string& text) {
  write_bytes(path, Bytes(text.begin(), text.end()));
}

TEST(TokenizeCorpus, TextDocumentsAreSeparatedByBlankLines) {
  const std::string in = temp_prefix("corpus") + ".txt", out = temp_prefix("out");
  write_text(in, "\nfirst line\nsecond\n\n\n\nthird\r\n\r\nlast");
  const data::CorpusStats s =
      data::tokenize_corpus(WideTokenizer(), 77, in, out);
  EXPECT_EQ(s.documents, 3);
  EXPECT_EQ(s.width, 4);
  EXPECT_EQ(documents(out), (std::vector<std::vector<std::int32_t>>{
                                wide("first line\nsecond"), wide("third\r"), wide("last")}));
  EXPECT_EQ(s.tokens, 18 + 7 + 5);
  EXPECT_EQ(data::open_token_file(out).tokenizer_id, 77u);
  EXPECT_EQ(data::open_token_file(out).vocab_size, 70000);
}

TEST(TokenizeCorpus, ByteTokenizerWritesTheBytesAsOneDocument) {
  const std::string in = temp_prefix("one") + ".txt", out = temp_prefix("out");
  write_text(in, "ab\nc\n");
  const auto byte = tokenizer::load("byte");
  const data::CorpusStats s = data::tokenize_corpus(*byte, 1, in, out);
  EXPECT_EQ(s.documents, 1);
  EXPECT_EQ(s.width, 2);
  EXPECT_EQ(documents(out), (std::vector<std::vector<std::int32_t>>{{'a', 'b', '\n', 'c'}}));
}

TEST(TokenizeCorpus, JsonlTakesTheTextOfEachLine) {
  const std::string in = temp_prefix("c") + ".jsonl", out = temp_prefix("out");
  write_text(in, "{\"text\": \"hi\", \"id\": 1}\n\n{\"text\": \"a\\nb\"}\n{\"text\": \"\"}\n");
  const data::CorpusStats s = data::tokenize_corpus(WideTokenizer(), 0, in, out);
  EXPECT_EQ(s.documents, 3);  // the empty text is its eos alone
  EXPECT_EQ(documents(out),
            (std::vector<std::vector<std::int32_t>>{wide("hi"), wide("a\nb"), wide("")}));
  // Without an eos the empty document has no tokens: skipped and counted.
  const auto byte = tokenizer::load("byte");
  const data::CorpusStats b = data::tokenize_corpus(*byte, 0, in, out);
  EXPECT_EQ(b.documents, 2);
  EXPECT_EQ(b.skipped, 1);
}

TEST(TokenizeCorpus, BadInputIsRefusedNamingTheLine) {
  const std::string in = temp_prefix("bad") + ".jsonl", out = temp_prefix("out");
  auto refusal = [&](const std::string& text) {
    write_text(in, text);
    try {
      data::tokenize_corpus(WideTokenizer(), 0, in, out);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(written)");
  };
  EXPECT_THAT(refusal("{\"text\": \"ok\"}\n{\"text\": oops}\n"),
              HasSubstr("line 2 (byte offset 15): not JSON"));
  EXPECT_THAT(refusal("{\"text\": \"ok\"}\n[1, 2]\n"),
              HasSubstr("line 2 (byte offset 15): expected a JSON object with a string field"));
  EXPECT_THAT(refusal("{\"body\": \"x\"}\n"), HasSubstr("line 1 (byte offset 0)"));
  EXPECT_THAT(refusal("{\"text\": 3}\n"), HasSubstr("string field \"text\""));
  EXPECT_THAT(refusal("\n\n"), HasSubstr("holds no document"));
  // Nothing was left behind by the refused runs.
  EXPECT_FALSE(std::filesystem::exists(out + ".index"));
  EXPECT_FALSE(std::filesystem::exists(out + ".tokens.tmp"));
  EXPECT_THROW(data::tokenize_corpus(WideTokenizer(), 0, "/no/such.jsonl", out), ConfigError);
  EXPECT_THROW(data::tokenize_corpus(WideTokenizer(), 0, in, "/no/such/folder/x"), ConfigError);
}

TEST(TokenizeCorpus, TokenizerIdentityIsTheHashOfItsFile) {
  const std::string a = temp_prefix("tok") + ".json", b = temp_prefix("tok") + ".json";
  write_text(a, "{\"x\": 1}");
  write_text(b, "{\"x\": 2}");
  EXPECT_NE(data::tokenizer_identity(a), data::tokenizer_identity(b));
  EXPECT_EQ(data::tokenizer_identity(a), data::tokenizer_identity(a));
  EXPECT_NE(data::tokenizer_identity("byte"), data::tokenizer_identity(a));
}

}  // namespace
}  // namespace origami::data_test
