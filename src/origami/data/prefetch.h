// The batches of a run prepared on a background thread: while step t computes, the thread
// reads step t + 1's micro-batches (this rank's rows only), so the data is off the critical
// path unless reading is slower than a step. The batches are those of BatchSampler, in the
// same order, so prefetching changes no result; the time a step waited for its batches is
// reported (the training log's "data wait", the metrics' "data_wait_s").
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "origami/data/dataset.h"

namespace origami::data {

// Which rows of which batches: micro-batches of `batch` sequences of `seq` tokens, `per_step`
// of them per step, this rank's rows [first_row, first_row + rows) of each.
struct BatchShape {
  std::int64_t batch = 1, seq = 1, per_step = 1, first_row = 0, rows = 1;
};

class BatchPrefetcher {
 public:
  // Prepares steps [first_step, last_step] (1-based, as the run loops count); micro-batch m of
  // step t is the sampler's batch (t - 1) * per_step + m. The dataset and tracker must outlive
  // the prefetcher. The first step's batches are started at once.
  BatchPrefetcher(const TokenDataset& dataset, std::uint64_t seed, BatchShape shape,
                  std::int64_t first_step, std::int64_t last_step, MemoryTracker& tracker);
  ~BatchPrefetcher();  // stops the thread (a batch in preparation is finished first)
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  struct Step {
    std::vector<Batch> micro;
    double wait_seconds = 0;  // how long next() blocked for them
  };
  // The next step's batches; an error the thread met (a ConfigError, OutOfBudget) is rethrown
  // here. Calling it past last_step is a programming error (Error).
  Step next();

 private:
  void run();

  const TokenDataset& dataset_;
  const std::uint64_t seed_;
  const BatchShape shape_;
  const std::int64_t first_step_, last_step_;
  std::int64_t next_step_;  // the step next() returns (the caller's thread only)
  MemoryTracker& tracker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<std::vector<Batch>> ready_;  // one step ahead, at most
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace origami::data
