#include "origami/train/preemption.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <vector>

namespace origami {

namespace {

std::atomic<int> first_signal{0};

// Async-signal-safe: an atomic, write(2) and _exit(2) only.
void on_stop_signal(int sig) {
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
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // file writes and waits go on where they were
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) ::sigaction(sig, &sa, nullptr);
}

int stop_signal() { return first_signal.load(); }

void set_stop_signal_for_testing(int signal) { first_signal.store(signal); }

int agreed_stop_signal(comm::Communicator* world) {
  std::vector<std::int64_t> v{stop_signal()};
  if (world != nullptr) world->all_reduce(v, v, comm::ReduceOp::Max);
  return static_cast<int>(v[0]);
}

}  // namespace origami
