#include "origami/train/preemption.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

namespace origami {

namespace {

std::atomic<int> first_signal{0};

void note_stop_signal(int sig) {
  int none = 0;
  if (first_signal.compare_exchange_strong(none, sig)) {
    const char msg[] = "origami: stop signal received: finishing the current step, then saving "
                       "(a second signal stops at once)\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    return;
  }
  const char msg[] = "origami: second stop signal: exiting now, without saving\n";
  (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
  ::_exit(128 + sig);
}

}  // namespace

void install_stop_signals() {
  // The signals are blocked in this thread, and so in every thread it starts (kernels,
  // transports), and taken by one thread of their own with sigwait. With a plain handler
  // (run on whichever compute thread the signal interrupted) runs under load were seen to end
  // with NaN gradients or a corrupted heap (cause not found); a waiting thread interrupts
  // nothing.
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) == 0) note_stop_signal(sig);
    }
  }).detach();
}

int stop_signal() { return first_signal.load(); }

void set_stop_signal_for_testing(int signal) { first_signal.store(signal); }

int agreed_stop_signal(comm::Communicator* world) {
  std::vector<std::int64_t> v{stop_signal()};
  if (world != nullptr) world->all_reduce(v, v, comm::ReduceOp::Max);
  return static_cast<int>(v[0]);
}

}  // namespace origami
