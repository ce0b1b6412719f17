// What the program says about the machine it runs on (issue 13): the SIMD target at start and
// in --metrics, MFU against this machine's measured and cached sgemm rate or a valid
// --peak-gflops, ORIGAMI_SIMD choosing a target, and a CPU below the build's baseline refused
// with the missing feature named (simulated by ORIGAMI_TEST_HIDE_CPU_FEATURE).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "origami/kernels/simd.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using origami::cli_test::CliRun;
using origami::cli_test::origami;

const std::string kShortRun = "train --model tiny --seq 32 --batch 2 --steps 2 --threads 1 ";

class SimdCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "origami_simd_cli_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // The program with its own, initially empty, calibration cache.
  CliRun run(const std::string& args, const std::string& env = "") {
    return origami(args, "XDG_CACHE_HOME=" + dir_ + "/cache " + env + " ");
  }
  std::string dir_;
};

TEST_F(SimdCli, StatesTheTargetAndMeasuresThePeakOnceThenUsesTheCache) {
  const std::string best = origami::kernels::simd_target();
  const std::string metrics = dir_ + "/metrics.jsonl";
  const CliRun first = run(kShortRun + "--metrics " + metrics);
  ASSERT_EQ(first.code, 0) << first.all();
  EXPECT_THAT(first.out, HasSubstr("SIMD target " + best));
  EXPECT_THAT(first.out, HasSubstr("(measured)"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/cache/origami/machine-peak.json"));
  std::ifstream in(metrics);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_EQ(nlohmann::json::parse(line).at("simd").get<std::string>(), best);
  }
  EXPECT_EQ(lines, 2);
  const CliRun second = run(kShortRun);
  ASSERT_EQ(second.code, 0) << second.all();
  EXPECT_THAT(second.out, HasSubstr("(cached in " + dir_ + "/cache/origami/machine-peak.json)"));
}

TEST_F(SimdCli, ExplicitPeakIsUsedAndNeedsToBePositive) {
  const CliRun r = run(kShortRun + "--peak-gflops 123");
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("--peak-gflops 123"));
  EXPECT_THAT(r.out, Not(HasSubstr("sgemm")));  // nothing calibrated
  for (const std::string bad : {"0", "-5", "nan", "inf"}) {
    const CliRun b = run(kShortRun + "--peak-gflops " + bad);
    EXPECT_EQ(b.code, 2) << bad << ": " << b.all();
    EXPECT_THAT(b.err, HasSubstr("--peak-gflops must be a positive number")) << bad;
  }
}

TEST_F(SimdCli, OrigamiSimdChoosesEachTargetAndRefusesUnknownOnes) {
  for (const std::string& t : origami::kernels::simd_targets()) {
    const CliRun r = run(kShortRun + "--peak-gflops 100", "ORIGAMI_SIMD=" + t);
    ASSERT_EQ(r.code, 0) << t << ": " << r.all();
    EXPECT_THAT(r.out, HasSubstr("SIMD target " + t + " ")) << t;
  }
  const CliRun bad = run(kShortRun, "ORIGAMI_SIMD=avx9000");
  EXPECT_EQ(bad.code, 2) << bad.all();
  EXPECT_THAT(bad.err, HasSubstr("ORIGAMI_SIMD: SIMD target 'avx9000'"));
  EXPECT_THAT(bad.err, HasSubstr(origami::kernels::simd_targets().back()));
}

TEST_F(SimdCli, CpuBelowTheBaselineIsRefusedNamingTheFeature) {
  const CliRun r = run("--version", "ORIGAMI_TEST_HIDE_CPU_FEATURE=sse4_2");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("this CPU lacks sse4_2"));
  EXPECT_THAT(r.err, HasSubstr("-DORIGAMI_BASELINE=x86-64"));
  EXPECT_EQ(r.out, "");  // refused before anything else ran
  EXPECT_EQ(run("--version").code, 0);
}

}  // namespace
