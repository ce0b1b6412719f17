// Numbers that used to crash or silently turn into nonsense (issue 14, items 3, 7 and 8):
// each is refused with exit code 2 and a message naming the flag, before any work starts.
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_run.h"

namespace {

using ::testing::HasSubstr;
using origami::cli_test::CliRun;
using origami::cli_test::origami;

// Each case: the arguments and what the message must name.
void expect_refused(const std::vector<std::pair<std::string, std::string>>& cases,
                    const std::string& env = "") {
  for (const auto& [args, needle] : cases) {
    const CliRun r = origami(args, env);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.all();
    EXPECT_THAT(r.err, HasSubstr(needle)) << args;
  }
}

const std::string kTrain = "train --model tiny --seq 16 --batch 2 --steps 1 --threads 1 ";

TEST(BadNumbers, TrainFlags) {
  expect_refused({
      {kTrain + "--log-every 0", "--log-every"},  // was SIGFPE: step % 0
      {kTrain + "--log-every 0 --strategy tp --degree 2", "--log-every"},
      {kTrain + "--lr inf", "--lr"},  // was accepted: every weight NaN after one step
      {kTrain + "--lr 5", "--lr"},
      {kTrain + "--lr nan", "--lr"},
      {kTrain + "--weight-decay -0.1", "--weight-decay"},
      {kTrain + "--weight-decay inf", "--weight-decay"},
      {kTrain + "--min-lr-ratio 2", "--min-lr-ratio"},
      {kTrain + "--min-lr-ratio nan", "--min-lr-ratio"},
      {kTrain + "--max-grad-norm -1", "--max-grad-norm"},
      {kTrain + "--max-grad-norm inf", "--max-grad-norm"},
  });
}

TEST(BadNumbers, MixtureOfExperts) {
  const std::string moe = "train --model tiny-moe --seq 16 --batch 2 --steps 1 --threads 1 ";
  expect_refused({
      {moe + "--moe-capacity-factor 0", "--moe-capacity-factor is 0"},
      {moe + "--moe-capacity-factor -1", "--moe-capacity-factor is -1"},
      {moe + "--moe-capacity-factor nan", "--moe-capacity-factor"},
      {kTrain + "--moe-capacity-factor 1.25", "dense"},
      // TSP's allgather schedule has no expert blocks, with or without pipeline stages: the
      // message names what runs them; a capacity runs where a rank routes the whole
      // micro-batch.
      {moe + "--strategy tsp --degree 2 --tsp-schedule allgather",
       "(--tsp-schedule allgather) does not support them"},
      {moe + "--mesh pp=2,tsp=2 --tsp-schedule allgather",
       "(--tsp-schedule allgather) does not support them"},
      {moe + "--strategy tsp --degree 2 --moe-capacity-factor 1.5", "--moe-capacity-factor"},
      {moe + "--strategy sp --degree 2 --moe-capacity-factor 1.5", "--strategy single, tp or tpsp"},
      {moe + "--strategy tsp --degree 2 --dry-run", "the dry run"},
      // The expert schedule: E/D whole experts a rank (4 experts do not split 3 ways), TSP's
      // experts only.
      {moe + "--strategy tsp --degree 3 --moe-schedule expert", "--moe-schedule ring"},
      {moe + "--strategy tsp --degree 2 --moe-schedule experts", "use ring (the default) or expert"},
      {moe + "--strategy tp --degree 2 --moe-schedule expert", "use --strategy tsp"},
      {kTrain + "--strategy tsp --degree 2 --moe-schedule expert", "the model is dense"},
  });
}

TEST(BadNumbers, MemoryCapSizes) {
  // Were a cap of -9223372036854775808 B (an unchecked cast) or of 0 B.
  expect_refused({{kTrain + "--memory-cap 1e20GiB", "1e20GiB"},
                  {kTrain + "--memory-cap inf", "inf"},
                  {kTrain + "--memory-cap 0.5", "whole number of bytes"}});
}

TEST(BadNumbers, CommunicationTimeout) {
  // Was an immediate "timeout after inf s": now() + inf overflows the clock.
  expect_refused({{kTrain + "--strategy tp --degree 2", "ORIGAMI_COMM_TIMEOUT_S"}},
                 "ORIGAMI_COMM_TIMEOUT_S=inf ");
  expect_refused({{kTrain + "--strategy tp --degree 2", "ORIGAMI_COMM_TIMEOUT_S"}},
                 "ORIGAMI_COMM_TIMEOUT_S=1e20 ");
}

TEST(BadNumbers, PlannerSizesAndOverrides) {
  const std::string plan = "plan --model tiny --world 2 --seq 16 ";
  expect_refused({
      // Were int64 overflows: a recommended layout of negative GiB that "fits".
      {"plan --model tiny --world 2 --seq 4611686018427387904", "--seq"},
      {"plan --model tiny --world 2 --seq 16 --batch 9223372036854775807", "--batch"},
      // Were -8589934592 GiB and nan times.
      {plan + "--memory-gib nan", "--memory-gib"},
      {plan + "--overhead-gib 1e300", "--overhead-gib"},
      {plan + "--peak-tflops inf", "--peak-tflops"},
      {plan + "--achievable nan", "--achievable"},
      {plan + "--inter-alpha-us -1", "--inter-alpha-us"},
  });
}

}  // namespace
