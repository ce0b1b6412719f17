// MPI across hosts (issue 14, last item): `origami train` under mpirun with its ranks in
// separate network namespaces (scripts/netns-hosts.sh), Open MPI limited to TCP (btl
// tcp,self) on the hosts' data network. The runs equal the in-process (threads) runs loss for
// loss; a data cable pulled mid-run ends every rank within the communication timeout, naming
// the operation and the peer, with no process left on any host, and once the cable is back
// the run resumes from its newest complete checkpoint to an uninterrupted run's final loss.
// Skipped (saying why) only where namespaces cannot be made: not root, no CAP_NET_ADMIN, no `ip`.
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../sanitizers.h"
#include "faults/process.h"
#include "hosts.h"

namespace origami::netns_test {
namespace {

namespace fs = std::filesystem;
using fault_test::Exit;
using fault_test::Process;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kTimeoutS = 3;  // ORIGAMI_COMM_TIMEOUT_S of these runs
const std::string kRun = "train --model tiny --seq 128 --batch 8 --threads 1 --log-every 1 ";

// The losses of a --metrics file, at full precision, in step order.
std::vector<std::string> metric_losses(const std::string& path) {
  const std::string text = Process::read(path);
  const std::regex re("\"loss\":([-+0-9.eE]+)");
  std::vector<std::string> v;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    v.push_back((*it)[1]);
  return v;
}

int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class Netns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "no mpirun";
    const std::string why = Hosts::unavailable();
    if (!why.empty()) GTEST_SKIP() << "network namespaces cannot be made here: " << why;
    dir_ = ::testing::TempDir() + "origami_netns_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // mpirun_command forwards it to the ranks with -x, as on a real cluster.
    ::setenv("ORIGAMI_COMM_TIMEOUT_S", std::to_string(kTimeoutS).c_str(), 1);
  }
  void TearDown() override {
    hosts_.reset();  // the namespaces go before the folder
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  // `n` hosts, made now; failing to make them, once the check said they can be, is a failure
  // (callers stop on HasFailure()).
  const Hosts& make_hosts(int n) {
    hosts_ = std::make_unique<Hosts>(n);
    const Shell up = hosts_->up();
    EXPECT_EQ(up.code, 0) << up.out;
    return *hosts_;
  }
  // The in-process run of `flags` (the reference); its --metrics file.
  std::string threads_run(const std::string& flags, const std::string& tag) {
    const std::string metrics = dir_ + "/" + tag + ".jsonl";
    Process p(fault_test::origami_bin() + " " + kRun + flags + " --metrics " + metrics,
              dir_ + "/" + tag + ".log");
    const Exit e = p.wait(120);
    EXPECT_EQ(e.code, 0) << p.output();
    return metrics;
  }
  // Every host's processes are gone within 5 s of mpirun's exit (the Open MPI daemons leave
  // mpirun's process group, so each namespace is searched), and so is every process of the
  // job's group.
  void expect_no_process_left(const Hosts& hosts, int n, const Process& job) {
    bool group_left = ::kill(-job.pid(), 0) == 0;
    for (int i = 0; i < 250 && group_left; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      group_left = ::kill(-job.pid(), 0) == 0;
    }
    EXPECT_FALSE(group_left) << "a process of mpirun's group is still running";
    for (int h = 1; h <= n; ++h) {
      std::vector<pid_t> left = hosts.pids(h);
      for (int i = 0; i < 250 && !left.empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        left = hosts.pids(h);
      }
      EXPECT_TRUE(left.empty()) << left.size() << " processes left on host " << h
                                << ", e.g. PID " << left.front();
    }
  }
  void link_down_and_resume(const std::string& layout, int slots);
  std::string dir_;
  std::unique_ptr<Hosts> hosts_;
};

// One rank per host (tsp 2) and two per host (dp=2 x tsp=2: each tsp pair on one host, the
// data-parallel all-reduce between the hosts): the losses equal the threads backend's, bit
// for bit, and Open MPI's own log shows each rank on its host's data address, talking TCP.
TEST_F(Netns, TrainingAcrossHostsOverTcpEqualsInProcessRanks) {
  struct Case {
    const char* flags;
    int hosts, slots;
  };
  for (const Case& c : {Case{"--strategy tsp --degree 2", 2, 1}, Case{"--strategy tsp --mesh dp=2,tsp=2", 2, 2}}) {
    SCOPED_TRACE(c.flags);
    const std::string tag = "slots" + std::to_string(c.slots);
    const std::string reference = threads_run(std::string(c.flags) + " --steps 4", tag + "_threads");
    const Hosts& hosts = make_hosts(c.hosts);
    ASSERT_FALSE(HasFailure());
    const std::string metrics = dir_ + "/" + tag + "_hosts.jsonl";
    Process p(hosts.mpirun(c.slots,
                           fault_test::origami_bin() + " " + kRun + c.flags + " --steps 4 --metrics " + metrics,
                           "--mca btl_base_verbose 30"),
              dir_ + "/" + tag + ".log");
    const Exit e = p.wait(120);
    const std::string out = p.output();
    ASSERT_EQ(e.code, 0) << out;
    fault_test::report_exit(std::string("hosts run, ") + c.flags, e);
    EXPECT_THAT(out, HasSubstr("on " + std::to_string(c.hosts * c.slots) + " ranks (mpi)"));
    EXPECT_EQ(metric_losses(metrics), metric_losses(reference)) << out;
    EXPECT_EQ(metric_losses(metrics).size(), 4u);
    // Each rank listens on its host's data address, which exists in that namespace only ...
    for (int h = 1; h <= c.hosts; ++h)
      EXPECT_EQ(occurrences(out, "btl: tcp: Found match: " + hosts.data_address(h) + " (data0)"), c.slots) << out;
    // ... and the ranks connect to each other there (one side of each pair connects).
    EXPECT_THAT(out, HasSubstr("btl: tcp: attempting to connect() to [["));
    EXPECT_THAT(out, HasSubstr("address 10.232." + std::to_string(hosts.id()) + "."));
    EXPECT_THAT(out, HasSubstr("Using tcp btl for send to"));
    EXPECT_THAT(out, Not(HasSubstr("vader")));  // no shared memory
    hosts_.reset();
  }
}

// Host 2's data cable is pulled after the first checkpoint: the ranks wait on each other
// until the timeout, report the operation and the peer, and the job ends with no process left;
// the newest complete checkpoint loads; with the cable back, the run resumes from it across
// the hosts and ends at the uninterrupted run's loss. `slots` ranks run on each of 2 hosts.
void Netns::link_down_and_resume(const std::string& layout, int slots) {
  const int ranks = 2 * slots;
  const Hosts& hosts = make_hosts(2);
  ASSERT_FALSE(HasFailure());
  const std::string run = dir_ + "/run";
  const std::string job = fault_test::origami_bin() + " " + kRun + layout +
                          " --steps 20 --save-every 1 --save-dir " + run;
  Process p(hosts.mpirun(slots, job), dir_ + "/cut.log");
  ASSERT_TRUE(p.wait_until([&] { return fs::exists(run + "/step-00000001/COMPLETE"); }, 60)) << p.output();
  const Shell cut = hosts.link(2, false);
  ASSERT_EQ(cut.code, 0) << cut.out;
  p.mark();
  const Exit e = p.wait(60);
  const std::string out = p.output();
  fault_test::report_exit("mpi " + layout + " across hosts, host 2's data link down", e);
  EXPECT_FALSE(e.timed_out) << out;
  EXPECT_NE(e.code, 0) << out;
  EXPECT_LT(e.seconds, kTimeoutS + 20) << out;
  EXPECT_THAT(out, Not(HasSubstr("step    20  loss"))) << "the run finished before the cut";
  // Each rank that got to report names the operation it waited in and its peer's world rank;
  // the first to time out aborts the job, so a later one may be killed before it reports. A
  // timeout inside an asynchronous collective (a prefetched all-gather) surfaces at the rank's
  // next call, which names itself first: "<op> on rank R of communicator 'C' was not run: an
  // earlier collective failed: communication timeout ...".
  const std::regex timed_out(
      "origami: rank [0-9] failed: (?:[a-z_]+ on rank [0-9] of communicator '[a-z-]+' was not "
      "run: an earlier collective failed: )?communication timeout after " +
      std::to_string(kTimeoutS) +
      " s: rank [0-9] of communicator '[a-z-]+' \\(world rank [0-9]\\) waited in [a-z_]+ "
      "\\((recv from|send to) peer [0-9] of '[a-z-]+' \\(world rank [0-9]\\)");
  int reported = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), timed_out); it != std::sregex_iterator(); ++it, ++reported)
    std::printf("[ reported ] %s\n", it->str().c_str());
  std::printf("[ measured ] %d of %d ranks reported the timeout before the job ended\n", reported, ranks);
  EXPECT_GE(reported, 1) << out;
  expect_no_process_left(hosts, 2, p);

  // The newest complete checkpoint.
  int newest = 0;
  for (const auto& step : fs::directory_iterator(run)) {
    const std::string name = step.path().filename().string();
    if (name.rfind("step-", 0) == 0 && fs::exists(step.path() / "COMPLETE"))
      newest = std::max(newest, std::stoi(name.substr(5)));
  }
  ASSERT_GE(newest, 1);
  std::printf("[ measured ] newest complete checkpoint: step %d of 20\n", newest);
  char name[32];
  std::snprintf(name, sizeof name, "/step-%08d", newest);
  const std::string checkpoint = run + name;
  // It loads: export reads and verifies every block (checksums, coverage, shapes).
  const Shell exported = shell(fault_test::origami_bin() + " export --checkpoint " + checkpoint +
                               " --out " + dir_ + "/exported");
  EXPECT_EQ(exported.code, 0) << exported.out;

  // The cable back, the same job resumes from it across the hosts.
  const Shell plug = hosts.link(2, true);
  ASSERT_EQ(plug.code, 0) << plug.out;
  Process resumed(hosts.mpirun(slots, job + " --resume " + checkpoint + " --metrics " + dir_ + "/resumed.jsonl"),
                  dir_ + "/resumed.log");
  const Exit r = resumed.wait(120);
  ASSERT_EQ(r.code, 0) << resumed.output();
  EXPECT_THAT(resumed.output(), HasSubstr("resumed from " + checkpoint));
  EXPECT_TRUE(fs::exists(run + "/step-00000020/COMPLETE"));
  const std::vector<std::string> reference = metric_losses(threads_run(layout + " --steps 20", "uninterrupted"));
  const std::vector<std::string> after = metric_losses(dir_ + "/resumed.jsonl");
  ASSERT_EQ(reference.size(), 20u);
  ASSERT_EQ(after.size(), static_cast<std::size_t>(20 - newest));
  EXPECT_EQ(after.back(), reference.back()) << "final loss";
  // Every step after the checkpoint, not only the last, is the uninterrupted run's.
  EXPECT_EQ(after, std::vector<std::string>(reference.begin() + newest, reference.end()));
}

// One rank per host: the TSP pair's own traffic crosses the cut.
TEST_F(Netns, LinkDownMidRunEndsEveryRankAndTheRunResumes) {
  link_down_and_resume("--strategy tsp --degree 2", 1);
}

// dp=2 x tsp=2, a TSP pair per host: the data-parallel all-reduce crosses the cut.
TEST_F(Netns, LinkDownMidRunEndsEveryRankAndTheRunResumesDpTimesTsp) {
#ifdef ORIGAMI_TESTS_SANITIZED
  // The abort and resume paths are the ones the one-pair case above runs under the sanitizers;
  // the Release build runs this layout's (its all-reduce crossing the cut).
  GTEST_SKIP() << "dp x tsp across hosts runs in the Release build (the suite's time)";
#endif
  link_down_and_resume("--strategy tsp --mesh dp=2,tsp=2", 2);
}

}  // namespace
}  // namespace origami::netns_test
