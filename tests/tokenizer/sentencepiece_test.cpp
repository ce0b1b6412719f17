// SentencePiece .model files through libsentencepiece. No package among Debian's or npm's ships
// a real .model file, so the test trains a small one with Debian's spm_train (BPE with byte
// fallback, as Llama 2's) and checks Origami's ids against spm_encode's.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "origami/core/error.h"
#include "origami/tokenizer/tokenizer.h"
#include "reference_data.h"

namespace {

namespace tok = origami::tokenizer;
namespace fs = std::filesystem;

class SentencePieceModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / ("origami_spm_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    const char* words[] = {"the", "model", "tokenizer", "reads", "text", "and", "writes",
                           "ids", "of", "pieces", "for", "training", "Llama", "data", "in",
                           "a", "byte", "fallback", "café", "naïve", "über"};
    std::ofstream train(dir_ / "train.txt");
    unsigned state = 19;
    for (int line = 0; line < 3000; ++line) {
      for (int w = 0; w < 8; ++w) {
        state = state * 1103515245u + 12345u;
        train << (w ? " " : "") << words[(state >> 16) % std::size(words)];
      }
      train << ".\n";
    }
    train.close();
    const std::string cmd = "spm_train --input=" + (dir_ / "train.txt").string() +
                            " --model_prefix=" + (dir_ / "m").string() +
                            " --vocab_size=300 --model_type=bpe --byte_fallback=true"
                            " --character_coverage=1.0 --normalization_rule_name=identity"
                            " --remove_extra_whitespaces=false --minloglevel=2 > " +
                            (dir_ / "train.log").string() + " 2>&1";
    trained_ = std::system(cmd.c_str()) == 0 && fs::exists(dir_ / "m.model");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // spm_encode's ids for one line of text.
  static std::vector<std::int32_t> spm_encode(const std::string& line) {
    std::ofstream(dir_ / "in.txt") << line << "\n";
    const std::string cmd = "spm_encode --model=" + (dir_ / "m.model").string() +
                            " --output_format=id < " + (dir_ / "in.txt").string() + " > " +
                            (dir_ / "out.txt").string();
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    std::istringstream ids(origami::tokenizer_test::read_file((dir_ / "out.txt").string()));
    std::vector<std::int32_t> v;
    for (std::int32_t id; ids >> id;) v.push_back(id);
    return v;
  }
  static fs::path dir_;
  static bool trained_;
};
fs::path SentencePieceModel::dir_;
bool SentencePieceModel::trained_ = false;

TEST_F(SentencePieceModel, IdsEqualSpmEncodeAndDecodeGivesTheTextBack) {
  ASSERT_TRUE(trained_) << "spm_train failed (Debian's sentencepiece package, scripts/install-deps.sh)";
  const auto t = tok::load((dir_ / "m.model").string());
  EXPECT_EQ(t->kind(), "SentencePiece model");
  EXPECT_EQ(t->vocab_size(), 300);
  EXPECT_EQ(t->special_tokens().bos, 1);
  EXPECT_EQ(t->special_tokens().eos, 2);
  for (const std::string line :
       {"the tokenizer reads text", "Unseen words: zebra, quartz, 42 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80",
        "caf\xC3\xA9 na\xC3\xAFve \xC3\xBC" "ber  twice  spaced"}) {
    const auto ids = t->encode(line);
    EXPECT_EQ(ids, spm_encode(line)) << line;
    EXPECT_EQ(t->decode(ids), line);
  }
  const auto with = t->encode("the model", true);
  ASSERT_FALSE(with.empty());
  EXPECT_EQ(with.front(), 1);  // bos by default, as Llama's tokenizer
  EXPECT_THROW(t->decode(std::vector<std::int32_t>{300}), origami::ConfigError);
}

TEST_F(SentencePieceModel, TokenizerConfigBesideItDecidesTheSpecialTokens) {
  ASSERT_TRUE(trained_);
  const fs::path sub = dir_ / "with_config";
  fs::create_directories(sub);
  fs::copy_file(dir_ / "m.model", sub / "tokenizer.model", fs::copy_options::overwrite_existing);
  std::ofstream(sub / "tokenizer_config.json")
      << R"({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "add_bos_token": false, "add_eos_token": true})";
  const auto t = tok::load(sub.string());  // the folder: its tokenizer.model
  const auto ids = t->encode("the model", true);
  ASSERT_FALSE(ids.empty());
  EXPECT_NE(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  std::ofstream(sub / "tokenizer_config.json") << R"({"eos_token": "<nope>"})";
  EXPECT_THROW(tok::load(sub.string()), origami::ConfigError);
}

}  // namespace
