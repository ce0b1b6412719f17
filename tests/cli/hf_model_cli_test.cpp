// Hugging Face model folders from the command line: `origami inspect` (exit 0 importable, 2
// not, every refusal listed), `origami generate --model-dir` with the folder's tokenizer, eos
// and --stop (the same text from F32, BF16 shards and TSP), `origami train --tokenizer`, and an
// explicit head_dim trained on one device but refused by a parallel strategy.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "infer/hf_folder.h"

namespace {

using origami::cli_test::CliRun;
using origami::cli_test::origami;
using ::testing::HasSubstr;
using ::testing::Not;
namespace hf = origami::hf_test;

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

class HfModelCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = ::testing::TempDir() + "origami_hf_cli_" + std::to_string(::getpid());
    ASSERT_NO_FATAL_FAILURE(hf::write_folder(hf::Folder(dir_ + "/f32")));
    ASSERT_NO_FATAL_FAILURE(hf::write_folder(
        hf::Folder(dir_ + "/bf16")
            .with_bf16_shards()
            .with_generation_config(R"({"bos_token_id": 1, "eos_token_id": [2]})")));
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string dir_;
};
std::string HfModelCli::dir_;

TEST_F(HfModelCli, InspectDescribesAnImportableFolder) {
  const CliRun r = origami("inspect --model-dir " + dir_ + "/bf16");
  ASSERT_EQ(r.code, 0) << r.all();
  const origami::ModelConfig c = hf::small_config();
  EXPECT_THAT(r.out, HasSubstr(fmt::format("parameters: {} (from config.json), {} stored",
                                           c.num_parameters(), c.num_parameters())));
  EXPECT_THAT(r.out, HasSubstr("layers 2, hidden 64, heads 4, kv heads 2, head_dim 16, ffn 128, "
                               "vocab 32000"));
  EXPECT_THAT(r.out, HasSubstr("scaling llama3 (factor 8, low_freq_factor 1, high_freq_factor 4, "
                               "original_max_position_embeddings 32)"));
  EXPECT_THAT(r.out, HasSubstr("dtypes: BF16 (21 tensors)"));
  EXPECT_THAT(r.out, HasSubstr("shards: 2 (model-00001-of-00002.safetensors, "
                               "model-00002-of-00002.safetensors, from the index)"));
  EXPECT_THAT(r.out, HasSubstr("tokenizer: tokenizer.json"));
  EXPECT_THAT(r.out, HasSubstr("32000 tokens"));
  EXPECT_THAT(r.out, HasSubstr("eos ids (generation_config.json): 2"));
  EXPECT_THAT(r.out, HasSubstr("importable: yes"));
  const CliRun f = origami("inspect --model-dir " + dir_ + "/f32");
  EXPECT_EQ(f.code, 0) << f.all();
  EXPECT_THAT(f.out, HasSubstr("dtypes: F32 (21 tensors)"));
}

TEST_F(HfModelCli, InspectListsEveryRefusal) {
  const std::string bad = dir_ + "/refused";
  std::filesystem::create_directories(bad);
  std::filesystem::copy(
      dir_ + "/f32", bad,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  nlohmann::json cfg = nlohmann::json::parse(origami::model_config_to_json(hf::small_config()));
  cfg["tie_word_embeddings"] = true;
  cfg["attention_bias"] = true;
  cfg["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  hf::write_text(bad + "/config.json", cfg.dump());
  const CliRun r = origami("inspect --model-dir " + bad);
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.out, HasSubstr("importable: no, 3 refusal(s)"));
  EXPECT_THAT(r.out, HasSubstr("tie_word_embeddings is true"));
  EXPECT_THAT(r.out, HasSubstr("attention_bias is true"));
  EXPECT_THAT(r.out, HasSubstr("rope_scaling.rope_type is \"yarn\""));
  EXPECT_THAT(r.out, HasSubstr("layers 2, hidden 64"));  // the rest still described
  // A missing folder, and a folder without weights.
  EXPECT_EQ(origami("inspect --model-dir " + dir_ + "/nowhere").code, 2);
  const std::string empty = dir_ + "/no_weights";
  std::filesystem::create_directories(empty);
  std::filesystem::copy_file(dir_ + "/f32/config.json", empty + "/config.json");
  const CliRun w = origami("inspect --model-dir " + empty);
  EXPECT_EQ(w.code, 2);
  EXPECT_THAT(w.out, HasSubstr("no model.safetensors"));
}

TEST_F(HfModelCli, GenerateFromAFolderWithItsTokenizerEosAndStop) {
  const std::string common = " --prompt 'Once upon a time' --max-new-tokens 10 --threads 2";
  const CliRun a = origami("generate --model-dir " + dir_ + "/f32" + common);
  ASSERT_EQ(a.code, 0) << a.all();
  EXPECT_THAT(first_line(a.out), ::testing::StartsWith("Once upon a time"));
  EXPECT_THAT(a.out, HasSubstr("finished: length (new tokens: 10)"));
  const CliRun b =
      origami("generate --model-dir " + dir_ + "/bf16" + common + " --strategy tsp --degree 2");
  ASSERT_EQ(b.code, 0) << b.all();
  EXPECT_EQ(first_line(b.out), first_line(a.out));
  // The prompt is the tokenizer's: bos + its tokens (not its bytes).
  EXPECT_THAT(a.out, Not(HasSubstr("prefill: 16 tokens")));
  // --stop: the text ends before the first occurrence of the stop string.
  const std::string generated = first_line(a.out).substr(std::string("Once upon a time").size());
  ASSERT_GE(generated.size(), 6u) << a.out;
  const std::string stop = generated.substr(generated.size() / 2, 2);
  ASSERT_EQ(stop.find('\''), std::string::npos);
  const CliRun s =
      origami("generate --model-dir " + dir_ + "/f32" + common + " --stop '" + stop + "'");
  ASSERT_EQ(s.code, 0) << s.all();
  EXPECT_EQ(first_line(s.out), "Once upon a time" + generated.substr(0, generated.find(stop)));
  EXPECT_THAT(s.out, HasSubstr("finished: stop"));
  // Bad input: an empty stop string, a tokenizer too large for a byte model.
  EXPECT_EQ(origami("generate --model-dir " + dir_ + "/f32" + common + " --stop ''").code, 2);
}

TEST_F(HfModelCli, TrainWithARealTokenizerAndRefuseOneLargerThanTheVocabulary) {
  const std::string tok = hf::llama2_tokenizer_dir() + "/tokenizer.json";
  const std::string cfg = dir_ + "/train.json";
  hf::write_text(cfg, origami::model_config_to_json(hf::small_config()));
  const CliRun t = origami("train --config " + cfg + " --tokenizer " + tok +
                           " --strategy single --steps 2 --seq 32 --batch 2 --threads 2 "
                           "--save-dir " +
                           dir_ + "/trained");
  ASSERT_EQ(t.code, 0) << t.all();
  EXPECT_EQ(origami::cli_test::losses(t.all()).size(), 2u) << t.all();
  // Its checkpoint generates text through the same tokenizer.
  const CliRun g = origami("generate --checkpoint " + dir_ + "/trained/step-00000002 --tokenizer " +
                           tok + " --prompt 'The cat' --max-new-tokens 4 --threads 2");
  ASSERT_EQ(g.code, 0) << g.all();
  EXPECT_THAT(first_line(g.out), ::testing::StartsWith("The cat"));

  origami::ModelConfig small = hf::small_config();
  small.vocab_size = 1000;
  hf::write_text(cfg, origami::model_config_to_json(small));
  const CliRun r = origami("train --config " + cfg + " --tokenizer " + tok +
                           " --strategy single --steps 1 --seq 32 --batch 2 --threads 1");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("32000 tokens"));
  EXPECT_THAT(r.err, HasSubstr("vocab_size is 1000"));
  EXPECT_THAT(r.out, Not(HasSubstr("step")));
}

TEST_F(HfModelCli, AnExplicitHeadDimTrainsOnOneDeviceAndIsRefusedInParallel) {
  origami::ModelConfig c = hf::small_config();
  c.vocab_size = 256;
  c.explicit_head_dim = 24;  // 4 x 24 = 96 != 64
  const std::string cfg = dir_ + "/head_dim.json";
  hf::write_text(cfg, origami::model_config_to_json(c));
  const std::string run = "train --config " + cfg + " --steps 1 --seq 16 --batch 2 --threads 2";
  const CliRun one = origami(run + " --strategy single");
  EXPECT_EQ(one.code, 0) << one.all();
  for (const char* strategy : {"tsp", "tp", "dp"}) {
    const CliRun r = origami(run + " --strategy " + std::string(strategy) + " --degree 2");
    EXPECT_EQ(r.code, 2) << strategy << r.all();
    EXPECT_THAT(r.err, HasSubstr("head_dim is 24")) << strategy;
  }
}

}  // namespace
