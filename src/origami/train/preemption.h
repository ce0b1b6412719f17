// Preemption (issue 14, item 4): SIGTERM, SIGINT and SIGUSR1 — how schedulers ask a job to
// stop — let the current step finish; at its boundary every rank agrees to stop, the run
// saves a checkpoint (with --save-dir) and ends with kPreemptedExitCode. A second signal ends
// the process at once with 128 + the signal's number.
#pragma once

#include <string>

#include "origami/comm/communicator.h"
#include "origami/core/error.h"

namespace origami {

// EX_TEMPFAIL: "try again later" — a scheduler's cue to requeue the job, which then resumes
// from --save-dir.
inline constexpr int kPreemptedExitCode = 75;

// Installs the handlers (the origami program does, before training; library callers choose).
void install_stop_signals();

// The first stop signal this process received (0: none).
int stop_signal();

// Tests: as if `signal` had been received once (0 clears).
void set_stop_signal_for_testing(int signal);

// Collective over `world` (null: this process): the stop signal of any rank, the same on
// every rank, so that all stop after the same step.
int agreed_stop_signal(comm::Communicator* world);

// Thrown by the training loops, on every rank, after the stop was handled (checkpoint saved).
class Preempted : public Error {
 public:
  Preempted(int signal, const std::string& message) : Error(message), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

}  // namespace origami
