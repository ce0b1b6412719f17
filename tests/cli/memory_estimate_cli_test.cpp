// A memory estimate before allocating (issue 14, item 9): runs that cannot fit are refused
// at once with exit code 2, the estimate and its largest category; the RoPE tables follow the
// run's sequence, not the config's max_position_embeddings.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using origami::cli_test::CliRun;
using origami::cli_test::origami;

std::string config_with(const nlohmann::json& changes, const std::string& tag) {
  nlohmann::json j = {{"vocab_size", 256},        {"hidden_size", 64},
                      {"intermediate_size", 96},  {"num_hidden_layers", 1},
                      {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                      {"rms_norm_eps", 1e-5},     {"rope_theta", 10000.0},
                      {"max_position_embeddings", 256}};
  j.update(changes);
  const std::string path =
      ::testing::TempDir() + "origami_mem_" + std::to_string(::getpid()) + "_" + tag + ".json";
  std::ofstream(path) << j.dump();
  return path;
}

double seconds_of(const std::string& args, CliRun* r) {
  const auto t0 = std::chrono::steady_clock::now();
  *r = origami(args);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

const std::string kRun = "train --seq 16 --batch 1 --steps 1 --threads 1 --strategy single ";

TEST(MemoryEstimate, ModelsThatCannotFitAreRefusedBeforeAllocating) {
  CliRun r;
  // Was std::bad_alloc, exit 1, no field named.
  EXPECT_LT(seconds_of(kRun + "--config " +
                           config_with({{"hidden_size", 1000000000}, {"num_attention_heads", 4},
                                        {"num_key_value_heads", 4}},
                                       "wide"),
                       &r),
            10);
  EXPECT_EQ(r.code, 2) << r.all();
  // 100000 layers allocated until the machine refused; here a million layers of h 256 (about
  // 12 TB of parameters and moments: beyond any machine that runs this test).
  const nlohmann::json deep = {{"num_hidden_layers", 1000000}, {"hidden_size", 256},
                               {"intermediate_size", 688}};
  EXPECT_LT(seconds_of(kRun + "--config " + config_with(deep, "deep"), &r), 10);
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("available memory"));
  EXPECT_THAT(r.err, HasSubstr("largest: "));
  // The parallel path too.
  r = origami("train --seq 16 --batch 2 --steps 1 --threads 2 --strategy tp --degree 2 "
              "--config " + config_with(deep, "deep2"));
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("per rank"));
}

TEST(MemoryEstimate, RopeTablesFollowTheRunsSequence) {
  // max_position_embeddings 2^25 with --seq 16 took 2.1 GB of tables; now a few KiB: the
  // run's peak workspace stays below 1 MiB.
  const std::string cfg = config_with({{"max_position_embeddings", 33554432}}, "rope");
  const std::string metrics = cfg + ".jsonl";
  const CliRun r = origami(kRun + "--config " + cfg + " --metrics " + metrics);
  ASSERT_EQ(r.code, 0) << r.all();
  std::ifstream in(metrics);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_LT(nlohmann::json::parse(line).at("peak_bytes").get<double>(), 16.0 * 1024 * 1024);
  fs::remove(metrics);
}

TEST(MemoryEstimate, DryRunOfAGiantSequenceIsRefusedAtOnce) {
  CliRun r;
  // Died of bad_alloc after 27 s.
  EXPECT_LT(seconds_of("train --dry-run --model tiny --seq 1073741824 --strategy tsp --degree 2", &r),
            10);
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("--seq 1073741824"));
}

}  // namespace
