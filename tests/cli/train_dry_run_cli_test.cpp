// `origami train --dry-run` as a user runs it: the report's JSON carries the library's numbers
// (dryrun/training.h), the table names every category, and bad input exits 2 with a message.

#include <cstdio>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "origami/dryrun/training.h"
#include "origami/model/config.h"
#include "origami/parallel/registry.h"

namespace {

using ::testing::HasSubstr;

using origami::cli_test::CliRun;
using origami::cli_test::losses;
using origami::cli_test::origami;
using origami::cli_test::slurp;
using origami::cli_test::temp_base;

TEST(TrainDryRunCli, JsonIsTheLibrarysReport) {
  const std::string json = temp_base() + ".json";
  const CliRun r = origami(
      "train --dry-run --model tiny --seq 64 --strategy tp --degree 2 --precision bf16 "
      "--flops-rate 500 --intra-beta 2e9 --json " +
      json);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("saved activations"));
  EXPECT_THAT(r.out, HasSubstr("all_reduce"));
  EXPECT_THAT(r.out, HasSubstr("step time"));
  const auto j = nlohmann::json::parse(slurp(json));
  ASSERT_EQ(j["ranks"].size(), 2u);

  origami::DryRunOptions o;
  o.seq = 64;  // --batch defaults to 1 sequence in a dry run, --steps to 1
  o.precision = origami::Precision::bf16();
  o.flop_rate = 500e9;
  o.link.intra_beta_Bps = 2e9;
  const origami::DryRunReport lib =
      origami::dry_run(origami::model_preset("tiny"),
                       origami::parallel::make_parallel_config(
                           "tp", 2, "", false, origami::parallel::TokenLayoutKind::Zigzag),
                       o);
  for (std::size_t r = 0; r < 2; ++r) {
    for (int c = 0; c < origami::kNumMemCategories; ++c) {
      const std::string name(origami::mem_category_name(static_cast<origami::MemCategory>(c)));
      EXPECT_EQ(j["ranks"][r]["peak_bytes"][name].get<std::int64_t>(),
                lib.ranks[r].memory.peak[static_cast<std::size_t>(c)])
          << name;
    }
    EXPECT_EQ(j["ranks"][r]["comm"]["tp"]["all_reduce"]["bytes_sent"].get<std::int64_t>(),
              lib.ranks[r].comm.at("tp").op("all_reduce").bytes_sent);
  }
  EXPECT_DOUBLE_EQ(j["step_s"].get<double>(), lib.step_s);
}

TEST(TrainDryRunCli, BadInputExplainsItself) {
  CliRun r = origami("train --dry-run --model tiny --seq 64 --precision fp8");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("known: fp32, bf16"));
  r = origami("train --dry-run --model tiny --seq 64 --flops-rate 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--flops-rate"));
  r = origami("train --dry-run --model tiny --seq 63 --strategy tsp --degree 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("63"));
  // Pipeline stages: the dry run checks the split as the run does (tiny: 2 layers).
  r = origami("train --dry-run --model tiny --seq 64 --mesh pp=2,tsp=2 --pp-layers 3,1");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--pp-layers 3,1 sums to 4 layers but the model has 2"));
}

// Pipeline stages in a dry run: each stage's ranks run their 1F1B order; the report has a row
// per rank (stage 0 is ranks 0, 1) and the pp traffic.
TEST(TrainDryRunCli, PipelineStagesRunPerStage) {
  const CliRun r =
      origami("train --dry-run --model tiny --seq 64 --mesh pp=2,tsp=2 --grad-accum 3");
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("pp=2"));
  EXPECT_THAT(r.out, HasSubstr("saved activations"));
  EXPECT_THAT(r.out, HasSubstr("step time"));
}

// The dry run's flags are refused, not ignored, where they would have no effect.
TEST(TrainDryRunCli, DryRunFlagsWithoutADryRunAreRefused) {
  CliRun r = origami("train --model tiny --seq 64 --steps 1 --flops-rate 500");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--flops-rate is the dry run's rate"));
  for (const char* flag : {"--intra-alpha 1e-5", "--intra-beta 1e9", "--inter-alpha 1e-5",
                           "--inter-beta 1e9", "--devices-per-node 4"}) {
    r = origami(std::string("train --model tiny --seq 64 --steps 1 --strategy tp --degree 2 ") +
                flag);
    EXPECT_EQ(r.code, 2) << flag;
    EXPECT_THAT(r.err, HasSubstr("add one of them")) << flag;
  }
  r = origami("train --dry-run --model tiny --seq 64 --link-model");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--link-model is for a real run"));
  r = origami("train --model tiny --seq 64 --steps 1 --strategy single --link-model");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("needs a parallel run"));
  r = origami("train --model tiny --seq 64 --steps 1 --strategy tp --degree 2 --link-model "
              "--intra-beta 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("betas > 0"));
}

// --link-model delays messages and changes nothing else: the same losses as without it.
TEST(TrainDryRunCli, LinkModelRunComputesTheSameSteps) {
  const std::string args = "train --model tiny --seq 64 --batch 2 --steps 2 --log-every 1 "
                           "--strategy tsp --degree 2";
  const CliRun plain = origami(args);
  const CliRun linked = origami(args + " --link-model --intra-alpha 1e-4 --intra-beta 1e9");
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(linked.code, 0) << linked.err;
  EXPECT_THAT(linked.out, HasSubstr("link model: intra-node alpha 0.0001 s beta 1e+09 B/s"));
  EXPECT_FALSE(losses(plain.out).empty());
  EXPECT_EQ(losses(plain.out), losses(linked.out));
}

}  // namespace
