// A rank of an MPI run killed (kill -9) or stopped (SIGSTOP) inside the training loop's
// collectives, or killed while writing a checkpoint (issue 14, item 6): the job ends non-zero
// within the communication timeout (plus mpirun's teardown), no rank is left behind, and the
// newest complete checkpoint resumes.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "process.h"

namespace origami::fault_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr double kTimeoutS = 3;  // ORIGAMI_COMM_TIMEOUT_S of these runs
const std::string kEnv = "env ORIGAMI_COMM_TIMEOUT_S=3 ";
const std::string kRun = "train --model tiny --seq 128 --batch 8 --threads 1 --log-every 1 "
                         "--strategy tp --degree 2 ";

class MpiKill : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "no mpirun";
    dir_ = ::testing::TempDir() + "origami_mpikill_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A long tp-2 run; once it logged step 3, `sig` goes to rank 1 (the last child of mpirun).
  // Returns the exit, timed from the signal, and checks that no rank outlives mpirun.
  Exit signal_rank(int sig) {
    Process p(kEnv + mpi_origami(2) + kRun + "--steps 100000", dir_ + "/run.log");
    EXPECT_TRUE(p.wait_until([&] { return file_has(dir_ + "/run.log", "step     3  loss"); }, 120))
        << p.output();
    const std::vector<pid_t> ranks = children_of(p.pid());
    EXPECT_EQ(ranks.size(), 2u);
    p.mark();
    if (!ranks.empty()) ::kill(ranks.back(), sig);
    const Exit e = p.wait(60);
    output_ = p.output();
    report_exit(fmt_signal(sig), e);
    for (pid_t r : ranks) {
      if (sig == SIGSTOP) ::kill(r, SIGKILL);  // in case mpirun could not end a stopped one
      EXPECT_TRUE(wait_gone(r)) << "rank " << r << " outlived mpirun";
    }
    return e;
  }
  static std::string fmt_signal(int sig) { return "mpi tp 2, rank 1 got signal " + std::to_string(sig); }
  static bool wait_gone(pid_t pid) {
    for (int i = 0; i < 250 && alive(pid); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return !alive(pid);
  }
  std::string dir_, output_;
};

TEST_F(MpiKill, KillNineOfARankEndsTheJob) {
  const Exit e = signal_rank(SIGKILL);
  EXPECT_FALSE(e.timed_out) << output_;
  EXPECT_NE(e.code, 0) << output_;
  EXPECT_LT(e.seconds, kTimeoutS + 20) << output_;
}

TEST_F(MpiKill, AStoppedRankMakesTheOtherTimeOutNamingThePeer) {
  const Exit e = signal_rank(SIGSTOP);
  EXPECT_FALSE(e.timed_out) << output_;
  EXPECT_NE(e.code, 0) << output_;
  EXPECT_LT(e.seconds, kTimeoutS + 20) << output_;
  EXPECT_THAT(output_, HasSubstr("communication timeout"));
  EXPECT_THAT(output_, HasSubstr("(world rank 1)"));
}

TEST_F(MpiKill, ARankKilledWhileSavingLeavesTheLastCompleteCheckpoint) {
  // Rank 0 ends (as kill -9 would) in the middle of writing its step-4 shard.
  const std::string run = dir_ + "/run";
  const std::string common = mpi_origami(2) + kRun + "--steps 4 --save-every 2 --save-dir " + run;
  Process crashed(kEnv + "ORIGAMI_CRASH_AT=mid_shard@4 " + common, dir_ + "/crash.log");
  const Exit c = crashed.wait(120);
  EXPECT_NE(c.code, 0) << crashed.output();
  EXPECT_FALSE(c.timed_out);
  EXPECT_TRUE(fs::exists(run + "/step-00000002/COMPLETE"));
  EXPECT_FALSE(fs::exists(run + "/step-00000004/COMPLETE"));
  Process resumed(kEnv + common, dir_ + "/resume.log");
  const Exit r = resumed.wait(120);
  EXPECT_EQ(r.code, 0) << resumed.output();
  EXPECT_THAT(resumed.output(), HasSubstr("ignoring incomplete checkpoint " + run + "/step-00000004"));
  EXPECT_THAT(resumed.output(), HasSubstr("resumed from " + run + "/step-00000002"));
  EXPECT_TRUE(fs::exists(run + "/step-00000004/COMPLETE"));
}

}  // namespace
}  // namespace origami::fault_test
