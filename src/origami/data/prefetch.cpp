#include "origami/data/prefetch.h"

#include <chrono>

#include "origami/core/error.h"

namespace origami::data {

BatchPrefetcher::BatchPrefetcher(const TokenDataset& dataset, std::uint64_t seed,
                                 BatchShape shape, std::int64_t first_step, std::int64_t last_step,
                                 MemoryTracker& tracker)
    : dataset_(dataset),
      seed_(seed),
      shape_(shape),
      first_step_(first_step),
      last_step_(last_step),
      next_step_(first_step),
      tracker_(tracker),
      thread_([this] { run(); }) {}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BatchPrefetcher::run() {
  try {
    for (std::int64_t step = first_step_; step <= last_step_; ++step) {
      // The batches are made outside the lock: reading them is the work that overlaps.
      std::vector<Batch> micro;
      BatchSampler sampler(dataset_, seed_, (step - 1) * shape_.per_step);
      for (std::int64_t m = 0; m < shape_.per_step; ++m)
        micro.push_back(
            sampler.next_rows(shape_.batch, shape_.first_row, shape_.rows, shape_.seq, tracker_));
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return stop_ || !ready_.has_value(); });
      if (stop_) return;
      ready_ = std::move(micro);
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
    changed_.notify_all();
  }
}

BatchPrefetcher::Step BatchPrefetcher::next() {
  ORIGAMI_CHECK(next_step_ <= last_step_, "data: step {} asked of a prefetcher that ends at {}",
                next_step_, last_step_);
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return ready_.has_value() || error_ != nullptr; });
  Step s;
  if (ready_.has_value()) {  // a step made before an error is still delivered
    s.micro = std::move(*ready_);
    ready_.reset();
  } else {
    std::rethrow_exception(error_);
  }
  changed_.notify_all();
  ++next_step_;
  s.wait_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

}  // namespace origami::data
