// `origami generate` as a user runs it: train the tiny model 2 steps to a checkpoint, then
// generate greedily on one device and with TSP over 2 ranks (the same text), from the
// checkpoint and from its Hugging Face export; bad input refused with exit code 2.
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

using origami::cli_test::first_line;

class GenerateCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = ::testing::TempDir() + "origami_gen_dir_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    const CliRun r = origami(
        "train --model tiny --strategy single --steps 2 --seq 32 "
        "--batch 2 --threads 2 --save-dir " +
        dir_);
    ASSERT_EQ(r.code, 0) << r.all();
    ckpt_ = dir_ + "/step-00000002";
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string dir_, ckpt_;
};
std::string GenerateCli::dir_, GenerateCli::ckpt_;

TEST_F(GenerateCli, TspAndSingleDeviceGenerateTheSameTextAndReport) {
  const std::string common = " --prompt 'The cat' --max-new-tokens 12 --threads 2";
  const CliRun single = origami("generate --checkpoint " + ckpt_ + common);
  ASSERT_EQ(single.code, 0) << single.all();
  const CliRun tsp =
      origami("generate --checkpoint " + ckpt_ + common + " --strategy tsp --degree 2");
  ASSERT_EQ(tsp.code, 0) << tsp.all();
  EXPECT_THAT(first_line(single.all()), ::testing::StartsWith("The cat"));
  EXPECT_EQ(first_line(single.all()).size(), 7u + 12u) << single.all();
  EXPECT_EQ(first_line(tsp.all()), first_line(single.all()));
  // Degree 4 over the tiny model's 2 kv heads: each kv head and its KV cache on two ranks.
  const CliRun replicated =
      origami("generate --checkpoint " + ckpt_ + common + " --strategy tsp --degree 4");
  ASSERT_EQ(replicated.code, 0) << replicated.all();
  EXPECT_EQ(first_line(replicated.all()), first_line(single.all()));
  for (const CliRun* r : {&single, &tsp, &replicated}) {
    EXPECT_THAT(r->all(), HasSubstr("prefill: 7 tokens"));
    EXPECT_THAT(r->all(), HasSubstr("decode: 11 tokens"));
    EXPECT_THAT(r->all(), HasSubstr("KV cache"));
    EXPECT_THAT(r->all(), HasSubstr("weights"));
  }
  EXPECT_THAT(tsp.all(), HasSubstr("\n1 "));  // a row per rank
  // Seeded sampling is the same at both too.
  const std::string sampled = common + " --temperature 0.8 --top-k 20 --top-p 0.9 --seed 3";
  const CliRun s1 = origami("generate --checkpoint " + ckpt_ + sampled);
  const CliRun s2 =
      origami("generate --checkpoint " + ckpt_ + sampled + " --strategy tsp --degree 2");
  ASSERT_EQ(s1.code, 0) << s1.all();
  EXPECT_EQ(first_line(s2.all()), first_line(s1.all()));
  // --prompt-file, and a batch of two prompts of different lengths (each printed at the end).
  const std::string pf = dir_ + "/prompt.txt";
  std::ofstream(pf) << "The cat";
  const CliRun f = origami("generate --checkpoint " + ckpt_ + " --prompt-file " + pf +
                               " --max-new-tokens 12 --threads 2");
  EXPECT_EQ(first_line(f.all()), first_line(single.all())) << f.all();
  const CliRun batch = origami("generate --checkpoint " + ckpt_ + common +
                                   " --prompt 'A dog sat down' --strategy tsp --degree 2");
  ASSERT_EQ(batch.code, 0) << batch.all();
  EXPECT_THAT(batch.all(), HasSubstr("[0] " + first_line(single.all()) + "\n"));
  EXPECT_THAT(batch.all(), HasSubstr("[1] A dog sat down"));
  EXPECT_THAT(batch.all(), HasSubstr("decode: 22 tokens"));
  // The exported Hugging Face folder gives the same text.
  const std::string hf = dir_ + "/hf";
  ASSERT_EQ(origami("export --checkpoint " + ckpt_ + " --out " + hf).code, 0);
  const CliRun from_hf = origami("generate --model-dir " + hf + common);
  ASSERT_EQ(from_hf.code, 0) << from_hf.all();
  EXPECT_EQ(first_line(from_hf.all()), first_line(single.all()));
}

// --precision bf16: bf16 weights and KV cache, said once on stderr; one device and TSP over 2
// ranks print the same greedy text, as in fp32 (the library's parity: tests/infer/bf16_infer_test);
// and a bf16 export (every tensor bf16) that it generates from.
TEST_F(GenerateCli, Bf16SaysSoOnceAndTspMatchesTheSingleDevice) {
  const std::string common = " --prompt 'The cat' --max-new-tokens 12 --precision bf16";
  const CliRun single = origami("generate --checkpoint " + ckpt_ + common);
  ASSERT_EQ(single.code, 0) << single.all();
  const CliRun tsp =
      origami("generate --checkpoint " + ckpt_ + common + " --strategy tsp --degree 2");
  ASSERT_EQ(tsp.code, 0) << tsp.all();
  EXPECT_EQ(first_line(tsp.out), first_line(single.out));
  EXPECT_EQ(first_line(single.out).size(), 7u + 12u) << single.all();
  for (const CliRun* r : {&single, &tsp}) {
    const std::string note = "origami: bf16: weights and KV cache held in bf16";
    const std::size_t at = r->err.find(note);
    ASSERT_NE(at, std::string::npos) << r->all();
    EXPECT_EQ(r->err.find(note, at + 1), std::string::npos) << "said more than once";
  }
  // export --dtype bf16: every tensor in bf16 (half the file), loadable by generate.
  const std::string f32 = dir_ + "/hf_f32", b16 = dir_ + "/hf_bf16";
  ASSERT_EQ(origami("export --checkpoint " + ckpt_ + " --out " + f32).code, 0);
  const CliRun e = origami("export --checkpoint " + ckpt_ + " --out " + b16 + " --dtype bf16");
  ASSERT_EQ(e.code, 0) << e.all();
  const auto f32_bytes = std::filesystem::file_size(f32 + "/model.safetensors");
  const auto b16_bytes = std::filesystem::file_size(b16 + "/model.safetensors");
  EXPECT_LT(b16_bytes, f32_bytes / 2 + 4096) << f32_bytes;  // + the header
  std::ifstream header(b16 + "/model.safetensors");
  std::string head(4096, '\0');
  header.read(head.data(), static_cast<std::streamsize>(head.size()));
  EXPECT_THAT(head, HasSubstr("\"BF16\""));
  EXPECT_THAT(head, ::testing::Not(HasSubstr("\"F32\"")));
  const CliRun from_b16 = origami("generate --model-dir " + b16 + common);
  ASSERT_EQ(from_b16.code, 0) << from_b16.all();
  EXPECT_EQ(first_line(from_b16.out).size(), 7u + 12u) << from_b16.all();
  const CliRun bad = origami("export --checkpoint " + ckpt_ + " --out " + b16 + " --dtype fp16");
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.all(), HasSubstr("--dtype fp16: use fp32 or bf16"));
}

// Decode's weight-read bandwidth beside the memory-read ceiling of as many threads (the ranks'
// kernel threads together), measured on the first run into the cache file, read from it on the
// next.
TEST_F(GenerateCli, StatesDecodeBandwidthAgainstAMeasuredThenCachedCeiling) {
  const std::string cache = dir_ + "/bw-cache";
  const std::string env = "XDG_CACHE_HOME=" + cache + " ";
  const std::string args =
      "generate --checkpoint " + ckpt_ + " --prompt 'The cat' --max-new-tokens 4 --threads 1";
  const CliRun first = origami(args + " --strategy tsp --degree 2", env);
  ASSERT_EQ(first.code, 0) << first.all();
  EXPECT_THAT(first.out, HasSubstr("decode weight reads: "));
  EXPECT_THAT(first.out, HasSubstr("memory read ceiling of 2 threads"));
  EXPECT_THAT(first.out, HasSubstr("; measured)"));
  const CliRun second = origami(args + " --strategy tsp --degree 2", env);
  ASSERT_EQ(second.code, 0) << second.all();
  EXPECT_THAT(second.out, HasSubstr("; cached in " + cache + "/origami/machine-peak.json)"));
  // The same weights at one rank: the same bytes per step, a ceiling of one thread.
  const CliRun single = origami(args, env);
  ASSERT_EQ(single.code, 0) << single.all();
  EXPECT_THAT(single.out, HasSubstr("memory read ceiling of 1 thread ("));
  const auto per_step = [](const std::string& out) {
    const std::size_t at = out.find(" MB of weights per step");
    return at == std::string::npos ? std::string()
                                   : out.substr(out.rfind('(', at), at - out.rfind('(', at));
  };
  EXPECT_FALSE(per_step(single.out).empty()) << single.out;
  EXPECT_EQ(per_step(single.out), per_step(first.out));
}

TEST_F(GenerateCli, RefusesBadInputWithExitCode2) {
  const std::string ck = "generate --checkpoint " + ckpt_;
  CliRun r = origami(ck + " --prompt ''");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.all(), HasSubstr("empty"));
  r = origami(ck + " --prompt abc --max-new-tokens 5000");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.all(), HasSubstr("max_position_embeddings"));
  r = origami(ck + " --prompt abc --temperature -1");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.all(), HasSubstr("--temperature"));
  r = origami(ck + " --prompt abc --strategy tsp --degree 3");  // 4 heads
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.all(), HasSubstr("attention heads"));
  EXPECT_THAT(r.all(), HasSubstr("the largest degree that works is 2"));
  r = origami(ck + " --prompt abc --precision fp16");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.all(), HasSubstr("--precision fp16: use fp32 or bf16"));
  r = origami("generate --prompt abc");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.all(), HasSubstr("--checkpoint"));
  r = origami("generate --checkpoint " + dir_ + "/nowhere --prompt abc");
  EXPECT_EQ(r.code, 2);
  // A prompt byte outside a vocabulary smaller than the byte tokenizer's.
  const std::string small = dir_ + "/v128.json";
  std::ofstream(small) << R"({"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64,
    "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
    "max_position_embeddings": 64})";
  ASSERT_EQ(origami("train --config " + small +
                        " --strategy single --steps 1 --seq 16 "
                        "--batch 1 --threads 1 --save-dir " +
                        dir_ + "/v128")
                .code,
            0);
  r = origami("generate --checkpoint " + dir_ + "/v128/step-00000001 --prompt 'caf\xc3\xa9'");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.all(), HasSubstr("outside the model's vocabulary of 128"));
  // A config the checkpoint does not match.
  const std::string cfg = dir_ + "/other.json";
  std::ofstream(cfg) << R"({"vocab_size": 256, "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2})";
  r = origami(ck + " --prompt abc --config " + cfg);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.all(), HasSubstr("describes"));
}

}  // namespace
