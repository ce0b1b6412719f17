// Preemption (issue 14, item 4): SIGTERM, SIGINT and SIGUSR1 finish the current step, save
// it on every rank (threads and MPI), clean partial files and exit 75; the run resumes from
// that checkpoint bit for bit; a second signal exits at once with 128 + signal.
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "../sanitizers.h"
#include "process.h"

namespace origami::fault_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kPreempted = 75;  // train/preemption.h

// Slow enough steps (tens of ms) that a signal lands mid-run: the signal goes after step 3 is
// logged (polled every 20 ms), so 100 steps leave a window of a second or more, which a loaded
// machine only widens; under the sanitizers each step is some 20x slower, so fewer steps leave
// the same window (and keep the suite's time; 300 steps here cost 37 s of the Release run).
#ifdef ORIGAMI_TESTS_SANITIZED
constexpr int kSteps = 20;
#else
constexpr int kSteps = 100;
#endif
const std::string kPreemptRun = "train --model tiny --seq 128 --batch 8 --threads 1 --log-every 1 "
                         "--warmup 2 --steps " + std::to_string(kSteps) + " ";

class Preemption : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "origami_preempt_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Starts `command`, waits for step `after` to be logged, sends `sig` to `target` (the
  // process itself, or with to_group every process of its group).
  Exit stop(const std::string& command, const std::string& tag, int sig, bool to_group = false,
            int after = 3) {
    Process p(command, dir_ + "/" + tag + ".log");
    const std::string line = fmt_step(after);
    EXPECT_TRUE(p.wait_until([&] { return file_has(dir_ + "/" + tag + ".log", line); }, 120))
        << p.output();
    p.mark();
    to_group ? p.signal_group(sig) : p.signal(sig);
    const Exit e = p.wait(60);
    output_ = p.output();
    report_exit(tag + " (signal " + std::to_string(sig) + ")", e);
    return e;
  }
  static std::string fmt_step(int step) {
    std::string s = std::to_string(step);
    return "step " + std::string(5 - s.size(), ' ') + s + "  loss";
  }
  // The uninterrupted run's final checkpoint equals the preempted-then-resumed one's.
  void expect_resumes_bit_for_bit(const std::string& command, const std::string& run_dir) {
    Process resumed(command + "--save-dir " + run_dir, dir_ + "/resumed.log");
    const Exit r = resumed.wait(300);
    ASSERT_EQ(r.code, 0) << resumed.output();
    EXPECT_THAT(resumed.output(), HasSubstr("resumed from " + run_dir + "/step-"));
    Process ref(command + "--save-dir " + dir_ + "/ref", dir_ + "/ref.log");
    ASSERT_EQ(ref.wait(300).code, 0) << ref.output();
    const std::string last = fmt::format("/step-{:08}/", kSteps);
    for (const auto& f : fs::directory_iterator(dir_ + "/ref" + last)) {
      const std::string name = f.path().filename().string();
      if (name.rfind("rank-", 0) != 0) continue;
      EXPECT_EQ(Process::read(f.path().string()), Process::read(run_dir + last + name))
          << name << " differs from the uninterrupted run's";
    }
  }
  std::string dir_, output_;
};

TEST_F(Preemption, SigtermSavesAndTheRunResumesBitForBit) {
  const std::string common = origami_bin() + " " + kPreemptRun + "--strategy tp --degree 2 ";
  const std::string run = dir_ + "/run";
  const Exit e = stop(common + "--save-dir " + run, "term", SIGTERM);
  ASSERT_EQ(e.code, kPreempted) << output_;
  EXPECT_LT(e.seconds, 10) << "time from the signal to the exit";
  EXPECT_THAT(output_, HasSubstr("stopped by signal 15"));
  EXPECT_THAT(output_, HasSubstr("saved checkpoint " + run + "/step-"));
  for (const auto& step : fs::directory_iterator(run))
    for (const auto& f : fs::directory_iterator(step.path()))
      EXPECT_EQ(f.path().string().find(".tmp."), std::string::npos) << f.path();
  EXPECT_FALSE(fs::exists(run + "/.origami.lock"));
  expect_resumes_bit_for_bit(common, run);
}

TEST_F(Preemption, SigintAndSigusr1StopTooWithoutASaveDir) {
  for (int sig : {SIGINT, SIGUSR1}) {
    const Exit e =
        stop(origami_bin() + " " + kPreemptRun + "--strategy single", "sig" + std::to_string(sig), sig);
    EXPECT_EQ(e.code, kPreempted) << output_;
    EXPECT_THAT(output_, HasSubstr("nothing saved (no --save-dir)"));
  }
}

TEST_F(Preemption, ASecondSignalExitsAtOnce) {
  // Steps of a few hundred ms: the second signal lands while the first one's step runs (the
  // small model in Release; the tiny one, some 20x slower per FLOP, under the sanitizers).
#ifdef ORIGAMI_TESTS_SANITIZED
  const std::string model = "tiny";
#else
  const std::string model = "small";
#endif
  Process p(origami_bin() + " train --model " + model +
                " --seq 256 --batch 8 --threads 1 --log-every 1 --steps 1000 "
                "--strategy single --save-dir " + dir_ + "/run",
            dir_ + "/twice.log");
  ASSERT_TRUE(p.wait_until([&] { return file_has(dir_ + "/twice.log", fmt_step(2)); }, 120));
  p.mark();
  p.signal(SIGTERM);
  p.wait_until([&] { return file_has(dir_ + "/twice.log", "stop signal received"); }, 10);
  p.signal(SIGTERM);
  const Exit e = p.wait(30);
  report_exit("second SIGTERM", e);
  EXPECT_EQ(e.code, 128 + SIGTERM) << p.output();
  EXPECT_LT(e.seconds, 5);
  EXPECT_THAT(p.output(), HasSubstr("second stop signal"));
}

TEST_F(Preemption, MpiRanksAgreeSaveAndExit) {
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "no mpirun";
  const std::string launcher = mpi_origami(2);
  const std::string run = dir_ + "/run";
  // SIGTERM to one rank only (as a node's scheduler may): both stop after the same step.
  Process p(launcher + kPreemptRun + "--strategy tp --degree 2 --save-dir " + run, dir_ + "/mpi.log");
  ASSERT_TRUE(p.wait_until([&] { return file_has(dir_ + "/mpi.log", fmt_step(3)); }, 120))
      << p.output();
  const std::vector<pid_t> ranks = children_of(p.pid());
  ASSERT_FALSE(ranks.empty()) << "no rank under mpirun";
  const pid_t rank = ranks.back();
  p.mark();
  ::kill(rank, SIGTERM);
  const Exit e = p.wait(60);
  report_exit("mpi tp 2, SIGTERM to rank 1", e);
  EXPECT_EQ(e.code, kPreempted) << p.output();
  EXPECT_LT(e.seconds, 15);
  EXPECT_THAT(p.output(), HasSubstr("saved checkpoint " + run + "/step-"));
  expect_resumes_bit_for_bit(launcher + kPreemptRun + "--strategy tp --degree 2 ", run);
}

}  // namespace
}  // namespace origami::fault_test
