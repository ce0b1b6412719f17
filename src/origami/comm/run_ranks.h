// Launching N in-process ranks (the threads transport) in one call.
//
//   run_ranks(4, [](Communicator& comm) { ... comm.tracker() ... });
//
// Each rank runs fn on its own thread with the world communicator, bound to a memory
// tracker named "rank r" (created here, or one of the caller's trackers with the overload
// taking them, so the caller can read peaks afterwards), computing on the launching thread's
// kernel thread count (or RunOptions::kernel_threads). If any rank throws, the world is
// aborted at once: every pending and later communication of the other ranks fails with a
// CommError naming the failed rank, so nobody hangs. A rank that returns while others still
// wait for it (it skipped a call) makes those waits fail at once, naming it. After all
// threads are joined, the first
// failure is rethrown with "rank r: " prefixed to its message, keeping its type for
// origami::Error and its subclasses (ConfigError, OutOfBudget, CommError); any other
// exception becomes an origami::Error.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "origami/comm/communicator.h"
#include "origami/comm/link_model.h"

namespace origami::comm {

struct RunOptions {
  LinkModel link;                        // off by default
  std::optional<double> timeout_s;       // default: default_timeout_s()
  std::optional<std::int64_t> memory_cap;  // per rank, on the trackers run_ranks creates
  bool virtual_time = false;  // the dry run: the link model advances virtual clocks, never sleeps
  int kernel_threads = 0;     // kernel threads of each rank; 0: the launching thread's count
};

using RankFn = std::function<void(Communicator&)>;

void run_ranks(int n, const RankFn& fn, const RunOptions& options = {});
void run_ranks(const std::vector<MemoryTracker*>& trackers, const RankFn& fn, const RunOptions& options = {});

}  // namespace origami::comm
