// `origami train` as a user runs it: a short real run, and every kind of bad input refused
// with exit code 2 and a message naming what to change, before any work starts.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "origami/io/safetensors.h"

namespace {

using ::testing::HasSubstr;
using origami::cli_test::CliRun;
using origami::cli_test::origami;

class TrainCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "origami_cli_dir_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  // A valid config.json with some fields replaced or added.
  std::string config_with(const nlohmann::json& changes) {
    nlohmann::json j = {{"vocab_size", 256},         {"hidden_size", 64},
                        {"intermediate_size", 96},   {"num_hidden_layers", 1},
                        {"num_attention_heads", 4},  {"num_key_value_heads", 2},
                        {"rms_norm_eps", 1e-5},      {"rope_theta", 10000.0},
                        {"max_position_embeddings", 256}};
    j.update(changes);
    return write("config" + std::to_string(configs_++) + ".json", j.dump());
  }
  int configs_ = 0;
  std::string dir_;
};

TEST_F(TrainCli, ShortRunPrintsLossThroughputMemoryAndWritesMetrics) {
  const std::string metrics = dir_ + "/metrics.jsonl";
  const CliRun r = origami("train --model tiny --seq 32 --batch 2 --steps 3 --log-every 1 "
                               "--threads 1 --metrics " + metrics);
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("step     3  loss"));
  EXPECT_THAT(r.all(), HasSubstr("tokens/s"));
  EXPECT_THAT(r.all(), HasSubstr("MFU"));
  EXPECT_THAT(r.all(), HasSubstr("saved activations"));
  std::ifstream in(metrics);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j.at("step").get<int>(), ++lines);
    EXPECT_GT(j.at("loss").get<double>(), 0.0);
    EXPECT_GT(j.at("tokens_per_s").get<double>(), 0.0);
    EXPECT_GT(j.at("mfu").get<double>(), 0.0);
  }
  EXPECT_EQ(lines, 3);
}

// --precision bf16 (core/precision.h): every layout trains and says what runs (the default
// TSP, single, dp, tp, sp, a pipeline); a mixture of experts and an unknown name exit 2 naming
// --precision before any work.
TEST_F(TrainCli, Bf16TrainsUnderEveryLayoutAndRefusesExperts) {
  const std::string common =
      "train --model tiny --seq 16 --batch 2 --steps 1 --log-every 1 --threads 2 ";
  for (const std::string layout :
       {"", "--strategy single", "--strategy dp --degree 2", "--strategy tp --degree 2",
        "--strategy sp --degree 2", "--mesh dp=1,pp=2 --grad-accum 2"}) {
    const CliRun r = origami(common + layout + " --precision bf16");
    ASSERT_EQ(r.code, 0) << layout << "\n" << r.all();
    EXPECT_THAT(r.all(), HasSubstr("precision: bf16 compute copy")) << layout;
    EXPECT_THAT(r.all(), HasSubstr("step     1  loss")) << layout;
  }
  CliRun r = origami("train --model tiny-moe --seq 32 --batch 2 --steps 1 --strategy single "
                     "--precision bf16");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("--precision bf16 trains dense models only"));
  r = origami(common + "--strategy single --precision fp16");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("unknown precision 'fp16'"));
}

TEST_F(TrainCli, RunsFromConfigFileAndDataFileAndWarnsAboutInformationalFields) {
  const std::string cfg = config_with({{"architectures", {"LlamaForCausalLM"}}});
  std::string text;
  for (int i = 0; i < 50; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  const std::string data = write("data.txt", text);
  const CliRun r = origami("train --config " + cfg + " --data " + data +
                               " --seq 16 --batch 1 --steps 2 --threads 1");
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("warning"));
  EXPECT_THAT(r.all(), HasSubstr("architectures"));
}

TEST_F(TrainCli, RefusesInconsistentConfigNamingTheField) {
  CliRun r = origami("train --config " +
                         config_with({{"hidden_size", 60}, {"num_attention_heads", 8}}));
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("hidden_size"));

  r = origami("train --config " + config_with({{"num_key_value_heads", 3}}));
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("num_key_value_heads"));

  // linear and llama3 are implemented (docs/models.md); other types are refused.
  r = origami("train --config " +
              config_with({{"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}}}));
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("rope_scaling"));

  r = origami("train --config " + config_with({{"tie_word_embeddings", "yes"}}));
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("tie_word_embeddings must be true or false"));

  r = origami("train --config " + config_with({{"hidden_size", "large"}}));
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("hidden_size"));

  r = origami("train --config " + config_with({{"num_hidden_layers", -1}}));
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("num_hidden_layers"));

  r = origami("train --config " + write("broken.json", "{\"hidden_size\": 64,"));
  EXPECT_EQ(r.code, 2) << r.all();
}

TEST_F(TrainCli, RefusesBadRunOptionsAndDataClearly) {
  CliRun r = origami("train --model nosuch");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("nosuch"));

  r = origami("train --model tiny --data " + dir_ + "/missing.txt");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("missing.txt"));

  r = origami("train --model tiny --data " + write("empty.txt", ""));
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("empty.txt"));

  r = origami("train --model tiny --data " + write("short.txt", "abc") + " --seq 64");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("--seq"));

  r = origami("train --model tiny --seq 100000");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("max_position_embeddings"));

  r = origami("train --model tiny --batch 0");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("--batch"));

  r = origami("train --model tiny --memory-cap lots");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("lots"));

  r = origami("train --model tiny --no-such-flag");
  EXPECT_EQ(r.code, 2) << r.all();
}

// A mixture-of-experts model (docs/moe.md) from the command line: TSP 2 (both schedules) and
// dp 2 x TSP 2 train to the same losses, a checkpoint exports as Mixtral's tensors, inspect describes
// it, and training starts again from the exported folder.
TEST_F(TrainCli, AMixtureOfExpertsTrainsUnderTspExportsAsMixtralAndReimports) {
  const std::string run = "train --model tiny-moe --steps 2 --seq 16 --log-every 1 --threads 1";
  const std::string save = " --save-dir " + dir_ + "/moe_run";
  const CliRun tsp = origami(run + " --batch 2 --strategy tsp --degree 2" + save);
  ASSERT_EQ(tsp.code, 0) << tsp.all();
  const std::vector<std::string> want = origami::cli_test::losses(tsp.all());
  ASSERT_EQ(want.size(), 2u) << tsp.all();
  // The expert load after each step line (docs/moe.md "Load metrics").
  EXPECT_THAT(tsp.all(), HasSubstr("experts: tokens [")) << tsp.all();
  const CliRun dp = origami(run + " --batch 1 --mesh dp=2,tsp=2");
  ASSERT_EQ(dp.code, 0) << dp.all();
  EXPECT_EQ(origami::cli_test::losses(dp.all()), want) << dp.all();
  // The expert schedule (two whole experts a rank) trains to the same losses, and its
  // checkpoint (each expert written by its owner alone) exports every expert whole.
  const CliRun expert = origami(run + " --batch 2 --strategy tsp --degree 2 --moe-schedule "
                                      "expert --save-dir " + dir_ + "/moe_expert_run");
  ASSERT_EQ(expert.code, 0) << expert.all();
  EXPECT_EQ(origami::cli_test::losses(expert.all()), want) << expert.all();
  const CliRun ee = origami("export --checkpoint " + dir_ +
                            "/moe_expert_run/step-00000002 --out " + dir_ + "/moe_expert_export");
  ASSERT_EQ(ee.code, 0) << ee.all();
  for (const char* owned_by : {"experts.0.w1", "experts.3.w2"})  // rank 0's and rank 1's
    EXPECT_EQ(origami::io::SafetensorsFile::open(dir_ + "/moe_expert_export/model.safetensors")
                  .entry(std::string("model.layers.1.block_sparse_moe.") + owned_by + ".weight")
                  .shape,
              (origami::Shape{64, 64}));

  const std::string out = dir_ + "/moe_export";
  const CliRun e =
      origami("export --checkpoint " + dir_ + "/moe_run/step-00000002 --out " + out);
  ASSERT_EQ(e.code, 0) << e.all();
  const auto f = origami::io::SafetensorsFile::open(out + "/model.safetensors");
  EXPECT_EQ(f.entry("model.layers.1.block_sparse_moe.gate.weight").shape,
            (origami::Shape{4, 64}));
  EXPECT_EQ(f.entry("model.layers.1.block_sparse_moe.experts.3.w2.weight").shape,
            (origami::Shape{64, 64}));
  const CliRun i = origami("inspect --model-dir " + out);
  EXPECT_EQ(i.code, 0) << i.all();
  EXPECT_THAT(i.out, HasSubstr("mixture of experts: 4 experts of ffn 64, 2 per token"));
  const CliRun again = origami("train --init-from " + out + " --config " + out +
                               "/config.json --steps 1 --seq 16 --batch 2 --threads 1 "
                               "--strategy tsp --degree 2");
  EXPECT_EQ(again.code, 0) << again.all();
}

// Each "experts: tokens [ ... ]  imbalance ..." line of a run's log.
std::vector<std::string> expert_loads(const std::string& out) {
  std::vector<std::string> v;
  for (std::size_t at = out.find("experts: tokens"); at != std::string::npos;
       at = out.find("experts: tokens", at + 1))
    v.push_back(out.substr(at, out.find('\n', at) - at));
  return v;
}

// The mesh strategies train a mixture of experts too (docs/moe.md "The mesh strategies"):
// `--strategy single` (the degree-1 mesh, bitwise one device: parallel.Parity.*/moe_single)
// prints the losses and the expert load that TSP 2, dp 2, tp 2 and sp 2 print; with a
// capacity, those of tp 2.
TEST_F(TrainCli, AMixtureOfExpertsTrainsOnOneDeviceAndUnderTheMeshStrategies) {
  const std::string run = "train --model tiny-moe --steps 2 --seq 16 --log-every 1 --threads 1";
  const CliRun single = origami(run + " --batch 2 --strategy single");
  ASSERT_EQ(single.code, 0) << single.all();
  const std::vector<std::string> want = origami::cli_test::losses(single.all());
  ASSERT_EQ(want.size(), 2u) << single.all();
  ASSERT_EQ(expert_loads(single.all()).size(), 2u) << single.all();
  for (const std::string layout : {"--batch 2 --strategy tsp --degree 2",
                                   "--batch 1 --strategy dp --degree 2",
                                   "--batch 2 --strategy tp --degree 2",
                                   "--batch 2 --strategy sp --degree 2"}) {
    const CliRun r = origami(run + " " + layout);
    ASSERT_EQ(r.code, 0) << layout << "\n" << r.all();
    EXPECT_EQ(origami::cli_test::losses(r.all()), want) << layout << "\n" << r.all();
    EXPECT_EQ(expert_loads(r.all()), expert_loads(single.all())) << layout;
  }
  // A capacity runs where every rank routes the whole micro-batch: tp 2 drops exactly what
  // one device drops (0.75 keeps at most 3/4 of the assignments).
  const std::string capped = run + " --batch 2 --moe-capacity-factor 0.75";
  const CliRun one = origami(capped + " --strategy single");
  const CliRun tp = origami(capped + " --strategy tp --degree 2");
  ASSERT_EQ(one.code, 0) << one.all();
  ASSERT_EQ(tp.code, 0) << tp.all();
  EXPECT_EQ(origami::cli_test::losses(tp.all()), origami::cli_test::losses(one.all()));
  EXPECT_EQ(expert_loads(tp.all()), expert_loads(one.all()));
  ASSERT_FALSE(expert_loads(one.all()).empty()) << one.all();
  EXPECT_THAT(expert_loads(one.all()).front(), ::testing::Not(HasSubstr("dropped 0")))
      << one.all();
}

// Pipeline stages (docs/moe.md, "Pipeline stages"): two micro-batches in flight, each stage
// its layers' balance, the aux loss and the expert load summed over the stages: the printed
// losses and loads are one device's (the same micro-batches).
TEST_F(TrainCli, AMixtureOfExpertsTrainsInPipelineStages) {
  const std::string run =
      "train --model tiny-moe --steps 2 --seq 16 --log-every 1 --threads 1 --batch 1 "
      "--grad-accum 2";
  const CliRun single = origami(run + " --strategy single");
  ASSERT_EQ(single.code, 0) << single.all();
  const std::vector<std::string> want = origami::cli_test::losses(single.all());
  ASSERT_EQ(want.size(), 2u) << single.all();
  ASSERT_EQ(expert_loads(single.all()).size(), 2u) << single.all();
  for (const std::string layout : {"--mesh pp=2", "--mesh pp=2,tsp=2 --moe-schedule expert"}) {
    const CliRun r = origami(run + " " + layout);
    ASSERT_EQ(r.code, 0) << layout << "\n" << r.all();
    EXPECT_EQ(origami::cli_test::losses(r.all()), want) << layout << "\n" << r.all();
    EXPECT_EQ(expert_loads(r.all()), expert_loads(single.all())) << layout;
  }
}

TEST_F(TrainCli, MemoryCapStopsTheRunWithTheCategoryNamed) {
  // Refused before the first allocation from the planner's estimate (issue 14, item 9), with
  // the largest category; it used to be the tracker's OutOfBudget (exit 1) mid-allocation.
  const CliRun r = origami("train --model tiny --seq 64 --steps 1 --threads 1 --memory-cap 1MiB");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("does not fit --memory-cap"));
  EXPECT_THAT(r.all(), HasSubstr("largest: saved activations"));
}

}  // namespace
