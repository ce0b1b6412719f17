// In-process ranks compute on the kernel thread count they were launched with (issue 15: the
// ranks of `origami generate` ran on one thread whatever --threads said): by default the
// launching thread's, or RunOptions::kernel_threads; OpenMP's budget follows it, so oneDNN's
// GEMMs from a rank use the same count.
#include <omp.h>

#include <atomic>
#include <vector>

#include <gtest/gtest.h>

#include "origami/comm/run_ranks.h"
#include "origami/kernels/threads.h"

namespace origami::comm {
namespace {

// Each rank's kernel thread count and OpenMP budget, as seen from inside the rank.
std::vector<std::pair<int, int>> seen_by_ranks(int n, const RunOptions& options) {
  std::vector<std::pair<int, int>> seen(static_cast<std::size_t>(n));
  run_ranks(n, [&](Communicator& c) {
    seen[static_cast<std::size_t>(c.rank())] = {kernels::thread_count(), omp_get_max_threads()};
  }, options);
  return seen;
}

TEST(RunRanksThreads, RanksInheritTheLaunchersKernelThreads) {
  const int saved = kernels::thread_count();
  kernels::set_thread_count(3);
  for (const auto& [threads, omp] : seen_by_ranks(2, {})) {
    EXPECT_EQ(threads, 3);
    EXPECT_EQ(omp, 3);
  }
  kernels::set_thread_count(saved);
}

TEST(RunRanksThreads, ExplicitCountPerRankWins) {
  RunOptions options;
  options.kernel_threads = 2;
  for (const auto& [threads, omp] : seen_by_ranks(3, options)) {
    EXPECT_EQ(threads, 2);
    EXPECT_EQ(omp, 2);
  }
}

}  // namespace
}  // namespace origami::comm
