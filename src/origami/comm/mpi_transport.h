// The MPI transport: the same Communicator over MPI processes launched by mpirun (Open MPI
// 4.1 from Debian), on one machine or many.
//
// Threading: a funnel thread owns every MPI call. It initialises MPI with
// MPI_THREAD_FUNNELED (the lowest level that allows a dedicated thread), posts the
// MPI_Isend/MPI_Irecv that callers queue, and drives progress with MPI_Testsome while
// anything is outstanding, so transfers advance while the rank computes and nobody has to
// call wait(). Why a funnel and not MPI_THREAD_MULTIPLE: this Open MPI has no asynchronous
// progress thread of its own ("OMPI progress: no"), so some thread has to poll anyway; with
// one owner there is no lock contention inside MPI and the thread level needed is the
// cheapest. Idle policy: it blocks on a condition variable when nothing is outstanding; with
// requests outstanding it polls, yielding the core between polls, for a window after the last
// activity of kPollWindow plus the time the outstanding bytes need at kPollBytesPerSecond
// (large messages move in fragments that need progress calls on both sides), and then sleeps
// with exponential backoff (kMinSleep .. kMaxSleep), so a rank waiting for a peer that is
// computing does not burn its core, and eight oversubscribed ranks on two cores share them.
// Measured here: a 2 ms window with sleeps up to 1 ms let a ring all-reduce of 8 ranks fall
// into the sleeping regime (11-26 ms for 8 bytes); 20 ms and 200 us give ~1.2 ms.
//
// Groups: Communicator::split creates a matching MPI communicator (MPI_Comm_split with the
// same color and key, so the rank order agrees). Matching is MPI's: (communicator, source,
// tag), non-overtaking. Chunking: a message moves as MPI messages of at most 1 MiB on its
// tag; a send keeps at most two chunks in flight and messages on one (communicator, peer,
// tag) start in order, so a small message on another tag is never queued behind all of a
// large one (measured: with whole messages, Open MPI's CMA path copied a 32 MiB message
// before delivering a 12-byte one posted after it), and no message size limit of MPI's int
// counts applies. Errors: MPI_ERRORS_RETURN on every communicator; a message of the wrong
// size becomes a CommError naming both sizes.
// The link model applies per message: completion is held until post time + alpha + bytes/beta
// (the post time of each side, since the two sides' clocks are not shared across machines).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "origami/comm/communicator.h"
#include "origami/comm/link_model.h"

namespace origami::comm {

class MpiFunnel;

// One per process: starts MPI (on the funnel thread) and finalises it on destruction.
class MpiRuntime {
 public:
  explicit MpiRuntime(LinkModel link = {});
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const;
  int size() const;
  // The world communicator of this process, bound to its tracker. Communicators must be
  // destroyed before the runtime.
  Communicator world(MemoryTracker& tracker);
  void set_link_model(const LinkModel& link);
  // Prints the message on stderr and ends every process of the job (MPI_Abort).
  [[noreturn]] void abort(int code, const std::string& message);

 private:
  std::shared_ptr<MpiFunnel> funnel_;
};

// The entry point of an MPI program: runs fn on the world communicator; if fn throws, prints
// "origami: rank r failed: ..." and aborts the whole job with exit code 1 (so no rank hangs
// waiting for it). Returns fn's exit code.
int mpi_main(const std::function<int(Communicator&)>& fn, LinkModel link = {});

}  // namespace origami::comm
