// infer::generate on Hugging Face folders: the same text from F32 and from BF16 shards, single
// device and TSP; the streamed pieces are the decode of the generated ids; eos ids (an int or a
// list) and stop strings end a sequence where they should; TextStream never splits a UTF-8
// character or releases the start of a stop string.
#include "origami/infer/generation.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hf_folder.h"
#include "origami/core/error.h"
#include "origami/infer/text_stream.h"
#include "origami/tokenizer/tokenizer.h"

namespace origami::infer {
namespace {

using ::testing::HasSubstr;

class Generation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    base_ = ::testing::TempDir() + "origami_generation_" + std::to_string(::getpid());
    ASSERT_NO_FATAL_FAILURE(hf_test::write_folder(hf_test::Folder(base_ + "/f32")));
    ASSERT_NO_FATAL_FAILURE(
        hf_test::write_folder(hf_test::Folder(base_ + "/bf16").with_bf16_shards()));
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(base_); }

  static GenerateOptions options(const std::string& folder) {
    GenerateOptions o;
    o.model_dir = base_ + "/" + folder;
    o.prompts = {"The llama said"};
    o.max_new_tokens = 12;
    o.threads = 2;
    return o;
  }
  // generate, with the streamed pieces of sequence 0 joined.
  static GenerateResult run(const GenerateOptions& o, std::string* streamed = nullptr) {
    return generate(o, [&](std::int64_t b, const std::string& piece) {
      if (streamed != nullptr && b == 0) *streamed += piece;
    });
  }
  static std::string base_;
};
std::string Generation::base_;

TEST_F(Generation, Bf16ShardsF32AndTspGiveTheSameTextWhichIsTheDecodeOfTheIds) {
  std::string streamed;
  const GenerateResult a = run(options("f32"), &streamed);
  ASSERT_EQ(a.tokens.size(), 1u);
  EXPECT_EQ(a.tokens[0].size(), 12u);
  EXPECT_EQ(a.finish[0], FinishReason::Length);
  const auto tok = tokenizer::load(base_ + "/f32");
  EXPECT_EQ(a.texts[0], tok->decode(a.tokens[0]));
  EXPECT_EQ(streamed, a.texts[0]);
  // The prompt was encoded with the bos of tokenizer_config.json (add_bos_token): its length
  // is the tokenizer's encode with special tokens.
  EXPECT_EQ(a.prefill_tokens,
            static_cast<std::int64_t>(tok->encode("The llama said", true).size()));
  EXPECT_EQ(tok->encode("The llama said", true).front(), 1);  // <s>

  const GenerateResult b = run(options("bf16"));
  EXPECT_EQ(b.tokens, a.tokens);
  GenerateOptions tsp = options("bf16");
  tsp.strategy = "tsp";
  tsp.degree = 2;
  EXPECT_EQ(run(tsp).tokens, a.tokens);
}

TEST_F(Generation, StopsAtEosIdsGivenAsAnIntOrAListAndAtStopStrings) {
  const GenerateResult full = run(options("f32"));
  const std::vector<std::int32_t>& ids = full.tokens[0];
  // The eos is the 4th generated id: generation ends before it, whichever form names it.
  const std::int32_t eos = ids[3];
  const auto first = std::find(ids.begin(), ids.end(), eos) - ids.begin();
  for (const std::string& form : {std::to_string(eos), "[31999, " + std::to_string(eos) + "]"}) {
    const std::string dir = base_ + "/eos";
    std::filesystem::remove_all(dir);
    ASSERT_NO_FATAL_FAILURE(hf_test::write_folder(hf_test::Folder(dir).with_generation_config(
        R"({"bos_token_id": 1, "eos_token_id": )" + form + "}")));
    for (const char* strategy : {"single", "tsp"}) {
      GenerateOptions o = options("eos");
      o.strategy = strategy;
      const GenerateResult r = run(o);
      EXPECT_EQ(r.finish[0], FinishReason::Eos) << form << " " << strategy;
      EXPECT_EQ(r.tokens[0], std::vector<std::int32_t>(ids.begin(), ids.begin() + first)) << form;
    }
  }
  // A stop string from the middle of the text: the text ends just before its first occurrence.
  const std::string text = full.texts[0];
  ASSERT_GE(text.size(), 8u);
  const std::string stop = text.substr(text.size() / 2, 3);
  GenerateOptions o = options("f32");
  o.stops = {stop, "a string that never appears"};
  std::string streamed;
  const GenerateResult r = run(o, &streamed);
  EXPECT_EQ(r.finish[0], FinishReason::Stop);
  EXPECT_EQ(r.texts[0], text.substr(0, text.find(stop))) << "stop '" << stop << "'";
  EXPECT_EQ(streamed, r.texts[0]);
  EXPECT_LT(r.tokens[0].size(), ids.size());
}

TEST_F(Generation, RefusesBadFoldersNamingTheFile) {
  const std::string dir = base_ + "/bad_eos";
  ASSERT_NO_FATAL_FAILURE(hf_test::write_folder(
      hf_test::Folder(dir).with_generation_config(R"({"eos_token_id": [2, 40000]})")));
  try {
    run(options("bad_eos"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("generation_config.json"));
    EXPECT_THAT(e.what(), HasSubstr("40000"));
  }
  hf_test::write_text(dir + "/generation_config.json", R"({"eos_token_id": "2"})");
  EXPECT_THROW(run(options("bad_eos")), ConfigError);
  // A tokenizer larger than the model's vocabulary.
  ModelConfig small = hf_test::small_config();
  small.vocab_size = 1000;
  ASSERT_NO_FATAL_FAILURE(
      hf_test::write_folder(hf_test::Folder(base_ + "/small").with_config(small)));
  try {
    run(options("small"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("32000 tokens"));
    EXPECT_THAT(e.what(), HasSubstr("vocab_size is 1000"));
  }
}

TEST(TextStream, HoldsBackPartialUtf8AndStopPrefixes) {
  // Bytes: "é" arrives in two tokens and is released whole.
  TextStream bytes(nullptr, {});
  EXPECT_EQ(bytes.push('a'), "a");
  EXPECT_EQ(bytes.push(0xC3), "");
  EXPECT_EQ(bytes.push(0xA9), "\xC3\xA9");
  EXPECT_EQ(bytes.push(0xF0), "");  // a 4-byte character's first byte, then the end
  EXPECT_EQ(bytes.finish(), "\xF0");
  EXPECT_EQ(bytes.text(), "a\xC3\xA9\xF0");
  EXPECT_EQ(TextStream::byte_piece(300), "<300>");
  // A stop string: its first bytes are held until they turn out not to start it.
  TextStream stop(nullptr, {"END"});
  std::string out;
  for (char c : std::string("aEN")) out += stop.push(static_cast<unsigned char>(c));
  EXPECT_EQ(out, "a");
  out += stop.push('X');
  EXPECT_EQ(out, "aENX");  // "EN" did not go on to "END": released with the X
  for (char c : std::string("ENDtail")) out += stop.push(static_cast<unsigned char>(c));
  EXPECT_TRUE(stop.stopped());
  EXPECT_EQ(out, "aENX");
  EXPECT_EQ(stop.finish(), "");
  EXPECT_EQ(complete_utf8_prefix("ab\xE6\x97", 4), 2u);
  EXPECT_EQ(complete_utf8_prefix("ab\xE6\x97\xA5", 5), 5u);
  EXPECT_EQ(complete_utf8_prefix("\xFF\xFF", 2), 2u);  // not UTF-8: never a character
}

TEST(TextStream, ByteFallbackTokensOfOneCharacterAreReleasedTogether) {
  const auto tok = tokenizer::load(hf_test::llama2_tokenizer_dir() + "/tokenizer.json");
  const std::string text = "llamas \xF0\x9F\xA6\x99 and \xE6\x97\xA5\xE6\x9C\xAC";  // 🦙, 日本
  const std::vector<std::int32_t> ids = tok->encode(text);
  TextStream s(tok.get(), {});
  std::string out;
  for (std::int32_t id : ids) {
    const std::string piece = s.push(id);
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "a split character";
    EXPECT_EQ(complete_utf8_prefix(piece, piece.size()), piece.size());
    out += piece;
  }
  out += s.finish();
  EXPECT_EQ(out, tok->decode(ids));
  EXPECT_GT(ids.size(), 8u);  // the emoji is byte tokens (<0xF0> ...)
}

}  // namespace
}  // namespace origami::infer
