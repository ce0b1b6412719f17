// The one communication interface every parallel strategy uses. A Communicator is a cheap,
// copyable reference to one rank's membership in a group; copies share state.
//
// Every operation has an asynchronous form (i...) returning a Handle and a blocking form.
// Point-to-point operations go straight to the transport (any number may be outstanding and
// they complete in any order). Collectives run, in issue order, on the communicator's worker
// thread as algorithms over point-to-point messages (collectives/, one algorithm per file,
// each with its cost); every rank must issue the same collectives in the same order with
// matching sizes -- a size mismatch is reported as CommError, not a hang.
//
// Threads: a communicator is driven by its rank's thread (one thread at a time); every rank
// issues the collectives of a communicator in the same order.
// Memory: staging buffers are tensors in MemCategory::CommBuffers on this rank's tracker.
// Buffers passed in must stay alive until the handle completes.
// Timeout: every wait on a message is bounded (default 120 s, env ORIGAMI_COMM_TIMEOUT_S,
// set_timeout per communicator); expiry raises CommError naming the operation, the rank and
// the peer, with the rank's recent operation log.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "origami/comm/buffer.h"
#include "origami/comm/handle.h"
#include "origami/comm/reduce_op.h"
#include "origami/comm/stats.h"
#include "origami/comm/transport.h"
#include "origami/core/memory_tracker.h"

namespace origami::comm {

namespace detail {
class CommImpl;
}

// Element counts of `parts` near-equal blocks of `total` (the first total % parts get one
// more): how reduce_scatter and all_reduce split a buffer that is not a multiple of the size.
std::vector<std::int64_t> balanced_counts(std::int64_t total, int parts);

// The longest timeout (about 11.6 days): a deadline of now + inf or + 1e20 s overflows the
// clock and would expire at once.
inline constexpr double kMaxTimeoutS = 1e6;

// The default timeout: ORIGAMI_COMM_TIMEOUT_S if set (a number in (0, kMaxTimeoutS]), else
// 120 s.
double default_timeout_s();

class Communicator {
 public:
  Communicator() = default;
  // The world communicator of one rank over a transport, bound to that rank's tracker.
  static Communicator world(std::shared_ptr<Transport> transport, MemoryTracker& tracker,
                            std::string name = "world");

  bool valid() const { return impl_ != nullptr; }
  int rank() const;
  int size() const;
  const std::string& name() const;
  int world_rank_of(int rank) const;
  MemoryTracker& tracker() const;
  Transport& transport() const;
  double timeout() const;
  void set_timeout(double seconds);

  // --- point-to-point (tag >= 0; matched by source, tag and communicator, in order)
  Handle isend(ConstBuffer buf, int dst, int tag);
  Handle irecv(Buffer buf, int src, int tag);
  void send(ConstBuffer buf, int dst, int tag) { isend(buf, dst, tag).wait(); }
  void recv(Buffer buf, int src, int tag) { irecv(buf, src, tag).wait(); }

  // --- collectives
  // buf on root is sent to every rank; same count everywhere.
  Handle ibroadcast(Buffer buf, int root);
  // out (root only; ignored elsewhere, may be empty) = op over ranks of in.
  Handle ireduce(ConstBuffer in, Buffer out, int root, ReduceOp op = ReduceOp::Sum);
  // out = concatenation of every rank's in, in rank order (out.count = size * in.count).
  Handle iall_gather(ConstBuffer in, Buffer out);
  // Variable counts: counts[i] elements from rank i (in.count == counts[rank]).
  Handle iall_gatherv(ConstBuffer in, Buffer out, std::vector<std::int64_t> counts);
  // out = block `rank` of op over ranks of in, blocks from balanced_counts(in.count, size).
  Handle ireduce_scatter(ConstBuffer in, Buffer out, ReduceOp op = ReduceOp::Sum);
  Handle ireduce_scatterv(ConstBuffer in, Buffer out, std::vector<std::int64_t> counts,
                          ReduceOp op = ReduceOp::Sum);
  // out = op over ranks of in (in and out may be the same memory).
  Handle iall_reduce(ConstBuffer in, Buffer out, ReduceOp op = ReduceOp::Sum);
  // Distributed argmax, in place: values (F32 or F64) and indices (I64) of equal count become
  // the element-wise maximum over ranks and the index that came with it (ties: smaller index).
  Handle iall_reduce_maxloc(Buffer values, Buffer indices);
  // Block j of in (send_counts[j] elements) goes to rank j; block i of out (recv_counts[i])
  // comes from rank i.
  Handle iall_to_all(ConstBuffer in, std::vector<std::int64_t> send_counts, Buffer out,
                     std::vector<std::int64_t> recv_counts);
  Handle ibarrier();

  void broadcast(Buffer buf, int root) { ibroadcast(buf, root).wait(); }
  void reduce(ConstBuffer in, Buffer out, int root, ReduceOp op = ReduceOp::Sum) {
    ireduce(in, out, root, op).wait();
  }
  void all_gather(ConstBuffer in, Buffer out) { iall_gather(in, out).wait(); }
  void all_gatherv(ConstBuffer in, Buffer out, std::vector<std::int64_t> counts) {
    iall_gatherv(in, out, std::move(counts)).wait();
  }
  void reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op = ReduceOp::Sum) {
    ireduce_scatter(in, out, op).wait();
  }
  void reduce_scatterv(ConstBuffer in, Buffer out, std::vector<std::int64_t> counts,
                       ReduceOp op = ReduceOp::Sum) {
    ireduce_scatterv(in, out, std::move(counts), op).wait();
  }
  void all_reduce(ConstBuffer in, Buffer out, ReduceOp op = ReduceOp::Sum) {
    iall_reduce(in, out, op).wait();
  }
  void all_reduce_maxloc(Buffer values, Buffer indices) { iall_reduce_maxloc(values, indices).wait(); }
  void all_to_all(ConstBuffer in, std::vector<std::int64_t> send_counts, Buffer out,
                  std::vector<std::int64_t> recv_counts) {
    iall_to_all(in, std::move(send_counts), out, std::move(recv_counts)).wait();
  }
  void barrier() { ibarrier().wait(); }

  // Collective over this communicator: ranks with the same color (>= 0) form a group,
  // ordered by (key, rank). The new communicator inherits the timeout.
  Communicator split(int color, int key, std::string name = "");

  // --- accounting
  CommStats stats() const;
  // This rank's world communicator and every live communicator split from it (at any depth),
  // in creation order, each with its own name: the rank's whole traffic.
  std::vector<CommStats> family_stats() const;
  void reset_stats();
  // Collective: rank 0 receives every rank's stats (in rank order); others get an empty list.
  // The gathering itself is accounted under "stats".
  std::vector<CommStats> gather_stats();

 private:
  explicit Communicator(std::shared_ptr<detail::CommImpl> impl) : impl_(std::move(impl)) {}
  detail::CommImpl& impl() const;
  std::shared_ptr<detail::CommImpl> impl_;
};

}  // namespace origami::comm
