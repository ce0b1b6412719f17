#include "origami/comm/run_ranks.h"

#include <exception>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "origami/comm/threads_transport.h"
#include "origami/core/error.h"
#include "origami/kernels/threads.h"

namespace origami::comm {

namespace {

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown exception";
  }
}

[[noreturn]] void rethrow_with_rank(const std::exception_ptr& e, int rank) {
  std::string prefix = fmt::format("rank {}: ", rank);
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    // A rank's own tracker already names it ("rank 3: allocating ..."): say it once.
    if (std::string_view(ex.what()).starts_with(prefix)) prefix.clear();
  } catch (...) {
  }
  try {
    std::rethrow_exception(e);
  } catch (const CommError& ex) {
    throw CommError(prefix + ex.what());
  } catch (const ConfigError& ex) {
    throw ConfigError(prefix + ex.what());
  } catch (const OutOfBudget& ex) {
    throw OutOfBudget(prefix + ex.what());
  } catch (const Error& ex) {
    throw Error(prefix + ex.what());
  } catch (const std::exception& ex) {
    throw Error(prefix + ex.what());
  } catch (...) {
    throw Error(prefix + "unknown exception");
  }
}

}  // namespace

void run_ranks(const std::vector<MemoryTracker*>& trackers, const RankFn& fn, const RunOptions& options) {
  const int n = static_cast<int>(trackers.size());
  ORIGAMI_CHECK(n >= 1, "run_ranks needs at least one rank");
  for (auto* t : trackers) ORIGAMI_CHECK(t != nullptr, "run_ranks: null tracker");
  if (options.timeout_s) ORIGAMI_CHECK(*options.timeout_s > 0, "run_ranks: timeout must be positive");
  auto world = ThreadsWorld::create(n, options.link, options.virtual_time);

  std::mutex mutex;
  std::exception_ptr first;
  int first_rank = -1;
  // The kernel thread count is per calling thread (kernels/threads.h): each rank thread starts
  // with the launcher's, or the one the options ask for, never the default of 1.
  const int kernel_threads = options.kernel_threads > 0 ? options.kernel_threads
                                                        : kernels::thread_count();
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        kernels::set_thread_count(kernel_threads);
        Communicator comm = Communicator::world(world->transport(r), *trackers[static_cast<std::size_t>(r)]);
        if (options.timeout_s) comm.set_timeout(*options.timeout_s);
        fn(comm);
        world->rank_finished(r);
      } catch (...) {
        auto e = std::current_exception();
        bool is_first = false;
        {
          std::lock_guard lock(mutex);
          if (!first) {
            first = e;
            first_rank = r;
            is_first = true;
          }
        }
        // Make every other rank fail fast instead of waiting for this one.
        if (is_first) world->abort(fmt::format("rank {} failed: {}", r, what_of(e)));
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) rethrow_with_rank(first, first_rank);
}

void run_ranks(int n, const RankFn& fn, const RunOptions& options) {
  ORIGAMI_CHECK(n >= 1, "run_ranks needs at least one rank, got {}", n);
  std::vector<std::unique_ptr<MemoryTracker>> owned;
  std::vector<MemoryTracker*> trackers;
  for (int r = 0; r < n; ++r) {
    owned.push_back(std::make_unique<MemoryTracker>(fmt::format("rank {}", r)));
    if (options.memory_cap) owned.back()->set_cap(*options.memory_cap);
    trackers.push_back(owned.back().get());
  }
  run_ranks(trackers, fn, options);
}

}  // namespace origami::comm
