// Ranks started with different flags or data (issue 14, item 5): an MPMD launch where one
// rank differs stops every rank with exit code 2 naming the flag, before any step.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "process.h"

namespace origami::fault_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class RankConsistency : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "no mpirun";
    dir_ = ::testing::TempDir() + "origami_consistency_" + std::to_string(::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::string a, b;
    for (int i = 0; i < 20; ++i) a += "the quick brown fox jumps over the lazy dog. ";
    for (int i = 0; i < 20; ++i) b += "pack my box with five dozen liquor jugs. ";
    std::ofstream(dir_ + "/a.txt") << a;
    std::ofstream(dir_ + "/b.txt") << b;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Rank 0 with `common + first`, rank 1 with `common + second` (flags may not repeat).
  Exit mpmd(const std::string& first, const std::string& second) {
    const std::string common = origami_bin() +
                               " train --model tiny --seq 16 --batch 2 --steps 2 "
                               "--strategy tp --degree 2 --log-every 1 ";
    Process p(kMpiEnv + "mpirun --allow-run-as-root --bind-to none -np 1 " + common + first + " : -np 1 " +
                  common + second,
              dir_ + "/mpmd.log");
    const Exit e = p.wait(120);
    output_ = p.output();
    return e;
  }
  std::string dir_, output_;
};

TEST_F(RankConsistency, AFlagOrTheDataThatDiffersIsNamedAndNothingRuns) {
  const struct {
    std::string first, second, flag;
  } cases[] = {
      {"--data " + dir_ + "/a.txt", "--data " + dir_ + "/b.txt", "--data"},
      {"--lr 0.002", "--lr 0.003", "--lr"},
      {"--seed 1", "--seed 2", "--seed"},
      {"--save-dir " + dir_ + "/x", "--save-dir " + dir_ + "/y", "--save-dir"},
  };
  for (const auto& c : cases) {
    const Exit e = mpmd(c.first, c.second);
    EXPECT_EQ(e.code, 2) << c.flag << "\n" << output_;
    EXPECT_THAT(output_, HasSubstr(c.flag + " differs across ranks")) << output_;
    EXPECT_THAT(output_, Not(HasSubstr("step     1"))) << c.flag;
    EXPECT_LT(e.seconds, 30);
  }
}

TEST_F(RankConsistency, RanksThatAgreeRun) {
  const Exit e = mpmd("--threads 1", "--threads 2");  // a rank's own thread count may differ
  EXPECT_EQ(e.code, 0) << output_;
  EXPECT_THAT(output_, HasSubstr("step     2"));
}

}  // namespace
}  // namespace origami::fault_test
