// The --save-dir of a run (issue 14, items 1, 2 and 6): checked before any compute, locked
// against a second run, a stale lock of a killed run replaced, an older checkpoint not
// resumed over a newer one, and what interrupted saves left removed.
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

const std::string kCommon = "train --model tiny --seq 16 --batch 2 --threads 1 --log-every 1 ";
const std::string kSaveDirRun = kCommon + "--strategy single ";

class SaveDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "origami_savedir_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Exit run(const std::string& args, const std::string& tag, double timeout_s = 120) {
    Process p(origami_bin() + " " + args, dir_ + "/" + tag + ".log");
    const Exit e = p.wait(timeout_s);
    output_ = p.output();
    return e;
  }
  std::string dir_, output_;
};

TEST_F(SaveDir, AFileOrAnUnwritablePlaceIsRefusedBeforeAnyStep) {
  std::ofstream(dir_ + "/file") << "x";
  Exit e = run(kSaveDirRun + "--steps 2 --save-dir " + dir_ + "/file", "file");
  EXPECT_EQ(e.code, 2) << output_;
  EXPECT_THAT(output_, HasSubstr("is a file"));
  EXPECT_THAT(output_, Not(HasSubstr("step     1")));
  // /proc refuses new folders even to root (a read-only folder does not stop root).
  e = run(kSaveDirRun + "--steps 2 --save-dir /proc/origami-no-such/runs", "proc");
  EXPECT_EQ(e.code, 2) << output_;
  EXPECT_THAT(output_, HasSubstr("--save-dir"));
  EXPECT_THAT(output_, Not(HasSubstr("step     1")));
  // The parallel path checks it too, before its ranks allocate.
  e = run(kCommon + "--steps 2 --strategy tp --degree 2 --save-dir " + dir_ + "/file", "tp");
  EXPECT_EQ(e.code, 2) << output_;
  EXPECT_THAT(output_, HasSubstr("is a file"));
}

TEST_F(SaveDir, ASecondRunIsRefusedAndAKilledRunsLockIsStale) {
  const std::string d = dir_ + "/runs";
  Process first(origami_bin() + " " + kSaveDirRun + "--steps 100000 --save-every 1000 --save-dir " + d,
                dir_ + "/first.log");
  ASSERT_TRUE(first.wait_until([&] { return file_has(dir_ + "/first.log", "step     1"); }, 60))
      << first.output();
  // The lock file names the holder.
  EXPECT_THAT(Process::read(d + "/.origami.lock"),
              HasSubstr("pid " + std::to_string(first.pid()) + " "));
  const Exit second = run(kSaveDirRun + "--steps 2 --save-dir " + d, "second", 30);
  EXPECT_EQ(second.code, 2) << output_;
  EXPECT_THAT(output_, HasSubstr("in use by another run"));
  EXPECT_THAT(output_, HasSubstr("PID " + std::to_string(first.pid())));
  EXPECT_LT(second.seconds, 10);
  // kill -9 leaves the file, not the lock: the next run replaces it and says so.
  first.signal(SIGKILL);
  first.wait(30);
  const Exit third = run(kSaveDirRun + "--steps 2 --save-dir " + d, "third");
  EXPECT_EQ(third.code, 0) << output_;
  EXPECT_THAT(output_, HasSubstr("replacing the stale lock of PID " + std::to_string(first.pid())));
  EXPECT_THAT(output_, HasSubstr("that PID is gone"));
  EXPECT_FALSE(fs::exists(d + "/.origami.lock")) << "a finished run leaves no lock file";
}

TEST_F(SaveDir, AnOlderCheckpointIsNotResumedOverANewerOne) {
  const std::string d = dir_ + "/runs";
  ASSERT_EQ(run(kSaveDirRun + "--steps 4 --save-every 2 --save-dir " + d, "four").code, 0) << output_;
  const Exit e = run(kSaveDirRun + "--steps 4 --resume " + d + "/step-00000002 --save-dir " + d, "older");
  EXPECT_EQ(e.code, 2) << output_;
  EXPECT_THAT(output_, HasSubstr("newer complete checkpoint " + d + "/step-00000004"));
  EXPECT_THAT(output_, HasSubstr("drop --resume"));
  // Into another folder it continues.
  EXPECT_EQ(run(kSaveDirRun + "--steps 4 --resume " + d + "/step-00000002 --save-dir " + dir_ + "/b",
                "other")
                .code,
            0)
      << output_;
}

TEST_F(SaveDir, TemporaryFilesOfAnInterruptedSaveAreRemoved) {
  const std::string d = dir_ + "/runs";
  fs::create_directories(d + "/step-00000007");
  const std::string tmp = d + "/step-00000007/rank-00000.safetensors.tmp.123.0";
  std::ofstream(tmp) << "partial";
  const Exit e = run(kSaveDirRun + "--steps 1 --save-dir " + d, "clean");
  EXPECT_EQ(e.code, 0) << output_;
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_THAT(output_, HasSubstr("left by an interrupted save"));
}

}  // namespace
}  // namespace origami::fault_test
