// The baseline check's feature lists and message (core/cpu_baseline.h), with a fake CPU.
#include "origami/core/cpu_baseline.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace origami {
namespace {

std::vector<std::string> missing_on(const char* baseline, CpuFeatureTest has) {
  const char* out[32];
  const std::size_t n = missing_cpu_features(baseline, has, out, 32);
  return {out, out + n};
}

bool nothing(const char*) { return false; }
bool everything(const char*) { return true; }
bool v2_but_no_popcnt(const char* f) {
  for (const char* v3 : {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe"})
    if (std::strcmp(f, v3) == 0) return false;
  return std::strcmp(f, "popcnt") != 0;
}

TEST(CpuBaseline, ListsWhatEachLevelNeeds) {
  EXPECT_TRUE(missing_on("x86-64", nothing).empty());
  EXPECT_EQ(missing_on("x86-64-v2", nothing),
            (std::vector<std::string>{"cx16", "popcnt", "sse3", "ssse3", "sse4_1", "sse4_2"}));
  EXPECT_EQ(missing_on("x86-64-v3", nothing).size(), 13u);
  EXPECT_TRUE(missing_on("x86-64-v3", everything).empty());
  EXPECT_EQ(missing_on("x86-64-v2", v2_but_no_popcnt), (std::vector<std::string>{"popcnt"}));
  EXPECT_EQ(missing_on("x86-64-v3", v2_but_no_popcnt).size(), 8u);
  EXPECT_TRUE(missing_on("native", nothing).empty());  // nothing to check against
}

TEST(CpuBaseline, ThisCpuRunsThisBuild) {
  EXPECT_TRUE(missing_on(cpu_baseline(), cpu_has).empty()) << cpu_baseline();
}

TEST(CpuBaseline, MessageNamesTheFeaturesAndTheWayOut) {
  const char* missing[] = {"sse4_1", "sse4_2"};
  char out[512];
  cpu_baseline_message("x86-64-v2", missing, 2, out, sizeof out);
  EXPECT_STREQ(out,
               "origami: this CPU lacks sse4_1, sse4_2, which this build (baseline x86-64-v2) "
               "needs; rebuild with cmake -DORIGAMI_BASELINE=x86-64 to run on it");
  char tiny[8];
  cpu_baseline_message("x86-64-v2", missing, 2, tiny, sizeof tiny);  // truncated, terminated
  EXPECT_EQ(std::strlen(tiny), 7u);
}

}  // namespace
}  // namespace origami
