// The state behind a Communicator (internal): group membership, the transport, the worker
// thread that runs collectives in issue order, and the point-to-point posting path that
// accounts and logs every message.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "origami/comm/collectives/context.h"
#include "origami/comm/handle.h"
#include "origami/comm/transport.h"
#include "origami/core/dry_run.h"
#include "origami/core/memory_tracker.h"

namespace origami::comm::detail {

// Collectives tag their messages 2^30 + (sequence number mod 2^30); user tags stay below.
inline constexpr std::int64_t kCollectiveTagBase = std::int64_t{1} << 30;

class CommImpl {
 public:
  CommImpl(std::shared_ptr<CommCore> core, std::shared_ptr<Transport> transport, MemoryTracker& tracker,
           std::uint64_t id, std::vector<int> world_ranks);
  ~CommImpl();
  CommImpl(const CommImpl&) = delete;
  CommImpl& operator=(const CommImpl&) = delete;

  // Runs fn on the worker after every earlier collective; the handle completes when it returns.
  // fp32_data: the collective moves fp32 elements (a dry-run profile accounts them at its
  // communication element size). In a dry run the collective runs under a stream clock that
  // starts at max(the issuer's clock now, the end of the previous collective here).
  Handle submit(const std::string& kind, std::int64_t bytes, std::function<void(CollectiveContext&)> fn,
                bool fp32_data = false);
  Handle post(bool is_send, const std::string& kind, const void* data, std::int64_t bytes, int peer,
              std::int64_t tag, std::int64_t seq, bool user_facing, bool fp32_data = false);

  std::shared_ptr<CommCore> core;
  std::shared_ptr<Transport> transport;
  MemoryTracker* tracker;
  std::uint64_t id;
  std::vector<int> world_ranks;  // rank in this communicator -> world rank
  std::atomic<std::int64_t> collective_seq{0};
  std::atomic<std::int64_t> p2p_seq{0};
  std::int64_t splits = 0;

 private:
  void worker_loop();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  bool started_ = false;
  std::thread worker_;
  std::exception_ptr poisoned_;  // a failed collective leaves the group out of step
  dryrun::Clock stream_;         // dry run: the worker's clock across collectives (worker only)
};

}  // namespace origami::comm::detail
