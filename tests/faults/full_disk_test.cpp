// A full disk while saving (issue 14, item 6): the run ends non-zero with the operating
// system's "No space left on device", and the earlier complete checkpoint still resumes. The
// disk is a small tmpfs (needs the right to mount: skipped otherwise).
#include <sys/mount.h>

#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "process.h"

namespace origami::fault_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(FullDisk, SaveFailsClearlyAndTheEarlierCheckpointResumes) {
  const std::string base = ::testing::TempDir() + "origami_fulldisk_" + std::to_string(::getpid());
  const std::string disk = base + "/disk";
  fs::create_directories(disk);
  // One tiny-model checkpoint is 1.4 MB (parameters and two moments): the second one fills it.
  if (::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=2200k") != 0) {
    fs::remove_all(base);
    GTEST_SKIP() << "cannot mount a tmpfs here";
  }
  const std::string common = origami_bin() +
                             " train --model tiny --seq 16 --batch 2 --threads 1 --steps 4 "
                             "--strategy tp --degree 2 ";
  Process full(common + "--save-every 2 --save-dir " + disk + "/run", base + "/full.log");
  const Exit e = full.wait(120);
  report_exit("full disk at the step-4 save (timed from the start)", e);
  EXPECT_NE(e.code, 0) << full.output();
  EXPECT_FALSE(e.timed_out);
  EXPECT_THAT(full.output(), HasSubstr("No space left on device"));
  EXPECT_TRUE(fs::exists(disk + "/run/step-00000002/COMPLETE"));
  EXPECT_FALSE(fs::exists(disk + "/run/step-00000004/COMPLETE"));
  Process resumed(common + "--resume " + disk + "/run/step-00000002 --save-dir " + base + "/b",
                  base + "/resumed.log");
  EXPECT_EQ(resumed.wait(120).code, 0) << resumed.output();
  EXPECT_THAT(resumed.output(), HasSubstr("resumed from"));
  ::umount(disk.c_str());
  fs::remove_all(base);
}

}  // namespace
}  // namespace origami::fault_test
