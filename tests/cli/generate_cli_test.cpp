// `origami generate` as a user runs it: train the tiny model 2 steps to a checkpoint, then
// generate greedily on one device and with TSP over 2 ranks (the same text), from the
// checkpoint and from its Hugging Face export; bad input refused with exit code 2.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace {

using ::testing::HasSubstr;

struct Result {
  int code;
  std::string output;
};

Result run_origami(const std::string& args) {
  static int counter = 0;
  const std::string log = ::testing::TempDir() + "origami_gen_" + std::to_string(::getpid()) + "_" +
                          std::to_string(counter++);
  const std::string cmd =
      std::string(ORIGAMI_BINARY_DIR) + "/origami " + args + " > " + log + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(log.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text.str()};
}

// The streamed text: the output's first line.
std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

class GenerateCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = ::testing::TempDir() + "origami_gen_dir_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    const Result r = run_origami(
        "train --model tiny --strategy single --steps 2 --seq 32 "
        "--batch 2 --threads 2 --save-dir " +
        dir_);
    ASSERT_EQ(r.code, 0) << r.output;
    ckpt_ = dir_ + "/step-00000002";
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string dir_, ckpt_;
};
std::string GenerateCli::dir_, GenerateCli::ckpt_;

TEST_F(GenerateCli, TspAndSingleDeviceGenerateTheSameTextAndReport) {
  const std::string common = " --prompt 'The cat' --max-new-tokens 12 --threads 2";
  const Result single = run_origami("generate --checkpoint " + ckpt_ + common);
  ASSERT_EQ(single.code, 0) << single.output;
  const Result tsp =
      run_origami("generate --checkpoint " + ckpt_ + common + " --strategy tsp --degree 2");
  ASSERT_EQ(tsp.code, 0) << tsp.output;
  EXPECT_THAT(first_line(single.output), ::testing::StartsWith("The cat"));
  EXPECT_EQ(first_line(single.output).size(), 7u + 12u) << single.output;
  EXPECT_EQ(first_line(tsp.output), first_line(single.output));
  for (const Result* r : {&single, &tsp}) {
    EXPECT_THAT(r->output, HasSubstr("prefill: 7 tokens"));
    EXPECT_THAT(r->output, HasSubstr("decode: 11 tokens"));
    EXPECT_THAT(r->output, HasSubstr("KV cache"));
    EXPECT_THAT(r->output, HasSubstr("weights"));
  }
  EXPECT_THAT(tsp.output, HasSubstr("\n1 "));  // a row per rank
  // Seeded sampling is the same at both too.
  const std::string sampled = common + " --temperature 0.8 --top-k 20 --top-p 0.9 --seed 3";
  const Result s1 = run_origami("generate --checkpoint " + ckpt_ + sampled);
  const Result s2 =
      run_origami("generate --checkpoint " + ckpt_ + sampled + " --strategy tsp --degree 2");
  ASSERT_EQ(s1.code, 0) << s1.output;
  EXPECT_EQ(first_line(s2.output), first_line(s1.output));
  // --prompt-file, and a batch of two prompts of different lengths (each printed at the end).
  const std::string pf = dir_ + "/prompt.txt";
  std::ofstream(pf) << "The cat";
  const Result f = run_origami("generate --checkpoint " + ckpt_ + " --prompt-file " + pf +
                               " --max-new-tokens 12 --threads 2");
  EXPECT_EQ(first_line(f.output), first_line(single.output)) << f.output;
  const Result batch = run_origami("generate --checkpoint " + ckpt_ + common +
                                   " --prompt 'A dog sat down' --strategy tsp --degree 2");
  ASSERT_EQ(batch.code, 0) << batch.output;
  EXPECT_THAT(batch.output, HasSubstr("[0] " + first_line(single.output) + "\n"));
  EXPECT_THAT(batch.output, HasSubstr("[1] A dog sat down"));
  EXPECT_THAT(batch.output, HasSubstr("decode: 22 tokens"));
  // The exported Hugging Face folder gives the same text.
  const std::string hf = dir_ + "/hf";
  ASSERT_EQ(run_origami("export --checkpoint " + ckpt_ + " --out " + hf).code, 0);
  const Result from_hf = run_origami("generate --model-dir " + hf + common);
  ASSERT_EQ(from_hf.code, 0) << from_hf.output;
  EXPECT_EQ(first_line(from_hf.output), first_line(single.output));
}

TEST_F(GenerateCli, RefusesBadInputWithExitCode2) {
  const std::string ck = "generate --checkpoint " + ckpt_;
  Result r = run_origami(ck + " --prompt ''");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("empty"));
  r = run_origami(ck + " --prompt abc --max-new-tokens 5000");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("max_position_embeddings"));
  r = run_origami(ck + " --prompt abc --temperature -1");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--temperature"));
  r = run_origami(ck + " --prompt abc --strategy tsp --degree 4");  // 2 kv heads
  EXPECT_EQ(r.code, 2);
  r = run_origami("generate --prompt abc");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--checkpoint"));
  r = run_origami("generate --checkpoint " + dir_ + "/nowhere --prompt abc");
  EXPECT_EQ(r.code, 2);
  // A prompt byte outside a vocabulary smaller than the byte tokenizer's.
  const std::string small = dir_ + "/v128.json";
  std::ofstream(small) << R"({"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64,
    "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
    "max_position_embeddings": 64})";
  ASSERT_EQ(run_origami("train --config " + small +
                        " --strategy single --steps 1 --seq 16 "
                        "--batch 1 --threads 1 --save-dir " +
                        dir_ + "/v128")
                .code,
            0);
  r = run_origami("generate --checkpoint " + dir_ + "/v128/step-00000001 --prompt 'caf\xc3\xa9'");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("outside the model's vocabulary of 128"));
  // A config the checkpoint does not match.
  const std::string cfg = dir_ + "/other.json";
  std::ofstream(cfg) << R"({"vocab_size": 256, "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2})";
  r = run_origami(ck + " --prompt abc --config " + cfg);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("describes"));
}

}  // namespace
