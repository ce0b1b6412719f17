// Completion of an asynchronous operation. Two separate ideas, kept apart so that a CUDA/NCCL
// backend can map the second onto stream ordering without blocking the host:
//   * host waiting: Handle::wait() blocks the calling thread (with the communicator's timeout
//     for point-to-point operations) and counts the blocked time as "exposed"; test() polls.
//   * ordering: Handle::then(fn) / Event::then(fn) runs fn once the operation completes, on
//     the thread that completes it, without anyone waiting. Collectives issued on one
//     communicator also execute in issue order, like work on one stream.
// A Handle is move-only. Dropping an unfinished point-to-point handle cancels the operation
// (its buffer is no longer touched once the destructor returns); dropping an unfinished
// collective handle waits for the collective (it is bounded by the per-step timeouts).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "origami/comm/op_log.h"
#include "origami/comm/stats.h"

namespace origami::comm {

namespace detail {

struct CommCore;
// Every communicator of one rank: the world and all split from it (weak: a family never keeps
// a communicator alive), so that a rank's whole traffic can be read (the dry run's report).
struct CommFamily {
  std::mutex m;
  std::vector<std::weak_ptr<CommCore>> cores;
};

// What a communicator shares with the operations it issued (they may outlive it).
struct CommCore {
  std::string name;
  int rank = 0;        // in the communicator
  int size = 1;
  int world_rank = 0;
  std::vector<int> world_ranks;  // of every member, by communicator rank (stall reports)
  std::atomic<double> timeout_s{120};
  StatsStore stats;
  std::shared_ptr<OpLog> log;  // the rank's log, shared by all its communicators
  std::shared_ptr<CommFamily> family;
};

struct OpState {
  std::shared_ptr<CommCore> core;
  std::string op;          // kind the bytes are accounted under ("all_reduce", "send", ...)
  std::string what;        // "send", "recv" or "collective"
  int peer = -1;           // rank in the communicator; -1 for a collective
  std::int64_t seq = 0;
  std::int64_t bytes = 0;      // moved by the transport
  std::int64_t accounted = 0;  // recorded in the stats: bytes, or the dry run's profile size
  bool collective = false;
  // Dry run (core/dry_run.h): the poster's virtual clock when it posted, and the virtual time
  // the operation completes at (set before complete()); -1 outside a dry run.
  double virtual_post_s = -1;
  double virtual_done_s = -1;
  bool user_facing = true;  // time_s is added for operations a caller issued
  std::chrono::steady_clock::time_point issued = std::chrono::steady_clock::now();

  std::mutex m;
  std::condition_variable cv;
  bool done = false;     // completion claimed (only the first complete() counts)
  bool settled = false;  // continuations have run: waiters may return
  std::exception_ptr error;
  std::vector<std::function<void()>> continuations;
  // Set by the transport for point-to-point operations: withdraws the request, returning
  // only when its buffer is no longer in use. Safe to call after completion.
  std::function<void()> cancel;

  // Accounts, logs, runs continuations, then wakes waiters (so when wait() returns every
  // continuation has run). Only the first call counts.
  void complete(std::exception_ptr e = nullptr);
  bool is_done();
  std::string describe() const;
  // Blocks until done or until the timeout; throws CommError (with the rank's log) on
  // expiry after cancelling, and rethrows the operation's own failure.
  void wait_for_completion(double timeout_s);
  std::string peer_name() const;  // "peer P of 'name' (world rank W)"
};

std::shared_ptr<OpState> make_state(std::shared_ptr<CommCore> core, std::string op, std::string what,
                                    int peer, std::int64_t seq, std::int64_t bytes);

class CollectiveContext;

}  // namespace detail

class Event {
 public:
  Event() = default;
  explicit Event(std::shared_ptr<detail::OpState> s) : state_(std::move(s)) {}
  bool ready() const;
  // Runs fn after completion (immediately, on this thread, if already complete).
  void then(std::function<void()> fn) const;

 private:
  std::shared_ptr<detail::OpState> state_;
};

class Handle {
 public:
  Handle() = default;  // an empty handle is complete
  explicit Handle(std::shared_ptr<detail::OpState> s) : state_(std::move(s)) {}
  Handle(Handle&& o) noexcept = default;
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();

  bool valid() const { return state_ != nullptr; }
  // True once complete; rethrows the operation's failure.
  bool test();
  // Blocks until complete; throws CommError on timeout or failure.
  void wait();
  Handle& then(std::function<void()> fn);
  Event event() const { return Event(state_); }

 private:
  friend class detail::CollectiveContext;
  void release() noexcept;
  std::shared_ptr<detail::OpState> state_;
};

// Waits for every handle (all of them, even when one fails; the first failure is rethrown).
void wait_all(std::vector<Handle>& handles);

}  // namespace origami::comm
