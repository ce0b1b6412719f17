// The tokenizer module's parts: UTF-8 repair, NFC, the split patterns, the byte tokenizer, a
// small hand-made tokenizer.json (added tokens, merges, special tokens from
// tokenizer_config.json), refusals that name the field, and the real vocabularies' special
// tokens (reference_test.cpp compares whole encodings with the reference).
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "origami/core/error.h"
#include "origami/tokenizer/byte_level.h"
#include "origami/tokenizer/nfc.h"
#include "origami/tokenizer/split_pattern.h"
#include "origami/tokenizer/tokenizer.h"
#include "origami/tokenizer/utf8.h"
#include "reference_data.h"

namespace {

namespace tok = origami::tokenizer;
namespace fs = std::filesystem;
using ::testing::HasSubstr;
using nlohmann::json;

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, InvalidSequencesBecomeOneReplacementPerMaximalSubpart) {
  EXPECT_EQ(tok::utf8::sanitize("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(tok::utf8::sanitize("\xC3\x28"), kFffd + "(");
  EXPECT_EQ(tok::utf8::sanitize("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // a surrogate
  EXPECT_EQ(tok::utf8::sanitize("\xE0\x80\x80"), kFffd + kFffd + kFffd);  // overlong
  EXPECT_EQ(tok::utf8::sanitize("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(tok::utf8::sanitize("\xF0\x9F\x98x"), kFffd + "x");  // a truncated emoji: one
  EXPECT_EQ(tok::utf8::sanitize("\xC0\xAF\xFF"), kFffd + kFffd + kFffd);
  EXPECT_EQ(tok::utf8::sanitize("a\xE2\x82"), "a" + kFffd);
  EXPECT_TRUE(tok::utf8::is_valid("\xF0\x9F\x98\x80"));
  EXPECT_FALSE(tok::utf8::is_valid("\xF0\x9F\x98"));
}

TEST(Nfc, ComposesReordersAndMapsSingletons) {
  EXPECT_EQ(tok::nfc("e\u0301"), "\u00E9");
  EXPECT_EQ(tok::nfc("a\u0301\u0323"), "\u1EA1\u0301");  // dot below (220) sorts before acute (230)
  EXPECT_EQ(tok::nfc("\u1100\u1161\u11A8"), "\uAC01");    // conjoining jamo to a syllable
  EXPECT_EQ(tok::nfc("\uAC00\u11A8"), "\uAC01");          // LV + T
  EXPECT_EQ(tok::nfc("\u212B"), "\u00C5");                // ANGSTROM SIGN
  EXPECT_EQ(tok::nfc("\u0301abc"), "\u0301abc");          // a leading mark stays
  EXPECT_EQ(tok::nfc("\uFB01 q\u0344"), "\uFB01 q\u0308\u0301");  // compatibility stays; 0344 splits
  const std::string ascii = "plain text, 123";
  EXPECT_EQ(tok::nfc(ascii), ascii);
}

std::vector<std::string> split(const tok::SplitPattern& p, std::string_view text) {
  std::vector<std::string_view> v;
  p.split(text, v);
  return {v.begin(), v.end()};
}

TEST(SplitPattern, Llama3Pattern) {
  const auto p = tok::SplitPattern::recognize(
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  ASSERT_TRUE(p);
  EXPECT_THAT(split(*p, "Hello world's  1234567 (x)\n\n  y"),
              ::testing::ElementsAre("Hello", " world", "'s", " ", " ", "123", "456", "7", " (",
                                     "x", ")\n\n", " ", " y"));
  EXPECT_THAT(split(*p, "WE'LL \t\u00E9t\u00E9\u3000\u4E2D\u6587!!"),
              ::testing::ElementsAre("WE", "'LL", " ", "\t\u00E9t\u00E9", "\u3000\u4E2D\u6587", "!!"));
  EXPECT_THAT(split(*p, "a  \r\n\r\n b"), ::testing::ElementsAre("a", "  \r\n\r\n", " b"));
}

TEST(SplitPattern, Gpt2Pattern) {
  const auto p = tok::SplitPattern::gpt2();
  EXPECT_THAT(split(p, "I'm 12 cats's  ok?!"),
              ::testing::ElementsAre("I", "'m", " 12", " cats", "'s", " ", " ok", "?!"));
  EXPECT_FALSE(tok::SplitPattern::recognize(R"(\w+|\s+)"));
}

TEST(ByteTokenizer, BytesAsTheyAre) {
  const auto t = tok::load("byte");
  EXPECT_EQ(t->kind(), "byte");
  EXPECT_EQ(t->vocab_size(), 256);
  const std::string bytes("a\xFF\x00z", 4);
  const auto ids = t->encode(bytes);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{97, 255, 0, 122}));
  EXPECT_EQ(t->decode(ids), bytes);
  EXPECT_THROW(t->decode(std::vector<std::int32_t>{256}), origami::ConfigError);
}

// A small byte-level tokenizer.json: the 256 byte tokens (id = byte), merges spelling
// "hello", the special added token <|end|> (260), and tokenizer_config.json naming it eos.
class SmallTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("origami_tok_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static json base() {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b)
      vocab[tok::byte_level::from_bytes(std::string(1, static_cast<char>(b)))] = b;
    vocab["he"] = 256;
    vocab["hel"] = 257;
    vocab["hell"] = 258;
    vocab["hello"] = 259;
    return {{"version", "1.0"},
            {"added_tokens",
             json::array({{{"id", 260}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}}})},
            {"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
            {"post_processor", nullptr},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model",
             {{"type", "BPE"},
              {"vocab", vocab},
              {"merges", json::array({"h e", "he l", "hel l", "hell o"})}}}};
  }
  std::string write(const json& j, const json& config = nullptr) {
    const std::string path = (dir_ / "tokenizer.json").string();
    std::ofstream(path) << j.dump();
    if (!config.is_null()) std::ofstream(dir_ / "tokenizer_config.json") << config.dump();
    return path;
  }
  // The ConfigError message of loading `j`.
  std::string refusal(const json& j) {
    try {
      tok::load(write(j));
    } catch (const origami::ConfigError& e) {
      return e.what();
    }
    return "(loaded)";
  }
  fs::path dir_;
};

TEST_F(SmallTokenizer, MergesAddedTokensAndSpecialTokens) {
  const auto t = tok::load(write(base(), {{"eos_token", "<|end|>"}, {"add_eos_token", true}}));
  EXPECT_EQ(t->kind(), "tokenizer.json BPE (byte-level)");
  EXPECT_EQ(t->vocab_size(), 261);
  EXPECT_EQ(t->special_tokens().eos, 260);
  EXPECT_FALSE(t->special_tokens().bos);
  const std::string text = "hello hello<|end|>hel";
  const auto ids = t->encode(text);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{259, 32, 259, 260, 257}));
  EXPECT_EQ(t->decode(ids), text);
  EXPECT_EQ(t->decode(ids, /*skip_special_tokens=*/true), "hello hellohel");
  EXPECT_EQ(t->encode("hello", true), (std::vector<std::int32_t>{259, 260}));
  EXPECT_EQ(t->encode("\xFF"), t->encode("\xEF\xBF\xBD"));  // invalid UTF-8 reads as U+FFFD
  EXPECT_THROW(t->decode(std::vector<std::int32_t>{261}), origami::ConfigError);
}

TEST_F(SmallTokenizer, LstripAndRstripTrimTheWhitespaceBesideAnAddedToken) {
  EXPECT_EQ(tok::load(write(base()))->encode("hello <|end|>\u3000hello"),
            (std::vector<std::int32_t>{259, 32, 260, 227, 128, 128, 259}));
  json j = base();
  j["added_tokens"][0]["lstrip"] = true;
  j["added_tokens"][0]["rstrip"] = true;
  EXPECT_EQ(tok::load(write(j))->encode("hello <|end|>\u3000hello"),
            (std::vector<std::int32_t>{259, 260, 259}));
}

TEST_F(SmallTokenizer, RefusesWhatItDoesNotSupportNamingTheField) {
  json j = base();
  j["model"]["type"] = "WordPiece";
  EXPECT_THAT(refusal(j), HasSubstr("field model.type is 'WordPiece'"));
  j = base();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_THAT(refusal(j), HasSubstr("field pre_tokenizer.type is 'Whitespace'"));
  j = base();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", json::array({{{"type", "Split"},
                                                        {"pattern", {{"Regex", "\\w+"}}},
                                                        {"behavior", "Isolated"}}})}};
  EXPECT_THAT(refusal(j), HasSubstr("field pre_tokenizer.pretokenizers[0].pattern.Regex"));
  j = base();
  j["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_THAT(refusal(j), HasSubstr("field normalizer.type is 'Lowercase'"));
  j = base();
  j["decoder"] = {{"type", "Sequence"}, {"decoders", json::array({{{"type", "CTC"}}})}};
  EXPECT_THAT(refusal(j), HasSubstr("field decoder.decoders[0].type is 'CTC'"));
  j = base();
  j["post_processor"] = {{"type", "BertProcessing"}};
  EXPECT_THAT(refusal(j), HasSubstr("field post_processor.type is 'BertProcessing'"));
  j = base();
  j["model"].erase("merges");
  EXPECT_THAT(refusal(j), HasSubstr("field model.merges is missing"));
  j = base();
  j["model"]["vocab"].erase(tok::byte_level::from_bytes("a"));
  EXPECT_THAT(refusal(j), HasSubstr("lacks the token of byte 0x61"));
  EXPECT_THAT(refusal("not a tokenizer"), HasSubstr("is not a JSON object"));
  EXPECT_THROW(tok::load((dir_ / "missing.json").string()), origami::ConfigError);
  EXPECT_THROW(tok::load((dir_ / "missing_folder").string()), origami::ConfigError);
}

TEST_F(SmallTokenizer, RefusesAnUnknownSpecialToken) {
  write(base(), {{"bos_token", "<|nope|>"}});
  try {
    tok::load(dir_.string());
    FAIL() << "loaded";
  } catch (const origami::ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("tokenizer_config.json: field bos_token"));
  }
}

// The real vocabularies (installed by scripts/install-test-tokenizers.sh).
class RealVocabulary : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(origami::tokenizer_test::tokenizer_json("llama3")))
      FAIL() << "the reference tokenizers are not installed; run scripts/install-test-tokenizers.sh";
  }
};

TEST_F(RealVocabulary, SpecialTokensAndSizes) {
  using origami::tokenizer_test::tokenizer_json;
  const auto llama2 = tok::load(tokenizer_json("llama2"));
  EXPECT_EQ(llama2->kind(), "tokenizer.json BPE (SentencePiece-style)");
  EXPECT_EQ(llama2->vocab_size(), 32000);
  EXPECT_EQ(llama2->special_tokens().bos, 1);
  EXPECT_EQ(llama2->special_tokens().eos, 2);
  EXPECT_FALSE(llama2->special_tokens().pad);
  const auto llama3 = tok::load(tokenizer_json("llama3"));
  EXPECT_EQ(llama3->vocab_size(), 128256);
  EXPECT_EQ(llama3->special_tokens().bos, 128000);
  EXPECT_EQ(llama3->special_tokens().eos, 128001);
  EXPECT_EQ(llama3->encode("Hello world"), (std::vector<std::int32_t>{9906, 1917}));
  const auto qwen3 = tok::load(tokenizer_json("qwen3"));
  EXPECT_EQ(qwen3->vocab_size(), 151669);
  EXPECT_FALSE(qwen3->special_tokens().bos);
  EXPECT_EQ(qwen3->special_tokens().eos, 151645);
  EXPECT_EQ(qwen3->special_tokens().pad, 151643);
  const std::string text = "Un caf\u00E9, \u4E2D\u6587 and \U0001F600 in 2026:\n\tdone.";
  for (const auto* t : {llama2.get(), llama3.get(), qwen3.get()}) EXPECT_EQ(t->decode(t->encode(text)), text);
}

TEST_F(RealVocabulary, ConcurrentEncodesAgree) {
  const auto t = tok::load(origami::tokenizer_test::tokenizer_json("llama3"));
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "word" + std::to_string(i % 97) + " ";
  const auto want = t->encode(text);
  std::vector<std::vector<std::int32_t>> got(2);
  std::vector<std::thread> threads;
  for (int k = 0; k < 2; ++k) threads.emplace_back([&, k] { got[k] = t->encode(text); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(got[0], want);
  EXPECT_EQ(got[1], want);
}

}  // namespace
