// The in-process transport: N ranks as threads of one process.
//
// Matching: one mutex guards every rank's queues of unmatched sends and receives; a post
// searches the opposite queue in posting order, so messages never overtake each other.
// Transfer: a message of at most kInlineBytes is copied by the thread whose post completed
// the match (sender or receiver, whoever came second). A larger one: the RECEIVER's progress
// thread copies the sender's bytes straight
// into the receiver's buffer (memory the receiver owns; collectives allocate their staging
// as CommBuffers tensors on the receiver's tracker), in chunks of kChunkBytes taken round
// robin over all active transfers, so a large transfer never holds a small one behind it.
// Progress needs no wait() from anyone. A progress thread blocks on its condition variable
// when idle and on a deadline while the link model holds a finished transfer: it never spins.
// The sender's buffer is read until the send completes (rendezvous, like a large MPI send);
// no zero-copy aliasing of it is ever handed to the receiver.
// A rank whose function returned (rank_finished) can match nothing more: operations waiting
// on it fail at once with a message saying so.
// Virtual time (the dry run, docs/design.md §10): nothing sleeps and no progress thread is used;
// a matched message is completed at once by the posting thread, its bytes copied only when
// both buffers are backed, and both sides get the virtual completion time
// t = (sender's clock when it posted) + alpha + accounted bytes / beta of the link class
// between the two world ranks (devices_per_node placement); a wait joins the waiter's clock
// with t. Links are not shared: concurrent messages do not slow each other down.
// Abort: when a rank fails, abort() fails every pending and future operation of every rank
// with a message naming the failed rank, so the others stop instead of hanging.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "origami/comm/transport.h"

namespace origami::comm {

class ThreadsWorld : public std::enable_shared_from_this<ThreadsWorld> {
 public:
  static constexpr std::int64_t kChunkBytes = 256 << 10;
  // Messages up to this size are copied by whichever thread completes the match.
  static constexpr std::int64_t kInlineBytes = 8 << 10;

  static std::shared_ptr<ThreadsWorld> create(int size, LinkModel link = {}, bool virtual_time = false);
  ~ThreadsWorld();
  ThreadsWorld(const ThreadsWorld&) = delete;
  ThreadsWorld& operator=(const ThreadsWorld&) = delete;

  int size() const { return size_; }
  const LinkModel& link() const { return link_; }
  // The transport seen by one rank.
  std::shared_ptr<Transport> transport(int world_rank);

  // Fails everything pending and everything posted later; the first reason is kept.
  void abort(const std::string& why);
  bool aborted(std::string* why) const;

  void post(int self, P2POp op, bool is_send);
  // The rank's function returned: nothing it has not posted can ever match, so every
  // unmatched operation that waits on it (and every later one) fails at once instead of
  // timing out -- a rank that skipped a collective is reported immediately.
  void rank_finished(int rank);

 private:
  struct Request;
  struct Transfer;
  struct RankQueues;
  using Completion = std::pair<std::shared_ptr<detail::OpState>, std::exception_ptr>;

  ThreadsWorld(int size, LinkModel link, bool virtual_time);
  void start();
  void progress_loop(int rank);
  void cancel(const std::shared_ptr<Request>& req);
  void fail_transfer_locked(const std::shared_ptr<Transfer>& t, std::exception_ptr e,
                            std::vector<Completion>* out);
  static void flush(std::vector<Completion>& done);

  int size_;
  LinkModel link_;
  bool virtual_time_ = false;
  mutable std::mutex mutex_;
  std::condition_variable chunk_cv_;  // a copy in flight finished (cancel waits on it)
  std::vector<std::unique_ptr<RankQueues>> ranks_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
  bool aborted_ = false;
  std::vector<bool> finished_;
  std::string abort_reason_;
};

}  // namespace origami::comm
