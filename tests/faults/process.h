// Child processes for the fault-injection tests: start `origami` (or any command line) in
// the background, signal it, and wait for it with a deadline, measuring the time to exit.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace origami::fault_test {

struct Exit {
  int code = -1;    // exit status, or -1
  int signal = 0;   // the signal that ended it, or 0
  double seconds = 0;  // from start (or from the last mark) to exit
  bool timed_out = false;
};

class Process {
 public:
  // Runs `command` under /bin/sh in its own process group (so that a signal to the group
  // reaches mpirun and its ranks), standard output and error into `log`.
  Process(const std::string& command, const std::string& log) : log_(log) {
    start_ = std::chrono::steady_clock::now();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      const std::string line = "exec " + command + " > " + log + " 2>&1";
      ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    ::setpgid(pid_, pid_);
  }
  ~Process() {
    if (!reaped_) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }
  void signal_group(int sig) const { ::kill(-pid_, sig); }
  // Restarts the clock that wait() reports against (e.g. when the signal was sent).
  void mark() { start_ = std::chrono::steady_clock::now(); }

  // Polls until `predicate` holds (true) or `timeout_s` passes or the process ends (false).
  template <class P>
  bool wait_until(P predicate, double timeout_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
      if (predicate()) return true;
      if (!reaped_ && ::waitpid(pid_, &status_, WNOHANG) == pid_) {
        reaped_ = true;
        return predicate();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // Waits for the exit; after `timeout_s` kills the group and reports timed_out.
  Exit wait(double timeout_s) {
    Exit e;
    if (!reaped_) {
      const bool done = wait_until([&] { return reaped_; }, timeout_s);
      if (!done) {
        e.timed_out = true;
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, &status_, 0);
        reaped_ = true;
      }
    }
    e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (WIFEXITED(status_)) e.code = WEXITSTATUS(status_);
    if (WIFSIGNALED(status_)) e.signal = WTERMSIG(status_);
    return e;
  }

  std::string output() const { return read(log_); }

  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int status_ = 0;
  bool reaped_ = false;
  std::chrono::steady_clock::time_point start_;
};

// Prints a measured time to exit (the figures docs/checkpoints.md quotes).
inline void report_exit(const std::string& what, const Exit& e) {
  std::printf("[ measured ] %s: exit %d (signal %d) %.2f s\n", what.c_str(),
              e.code, e.signal, e.seconds);
}

// The child processes of `pid` (e.g. the ranks under mpirun).
inline std::vector<pid_t> children_of(pid_t pid) {
  std::istringstream in(
      Process::read("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
  std::vector<pid_t> out;
  for (long c; in >> c;) out.push_back(static_cast<pid_t>(c));
  return out;
}

// True while `pid` exists and is not a zombie.
inline bool alive(pid_t pid) {
  const std::string stat = Process::read("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// The environment of every mpirun these tests start: LeakSanitizer reports Open MPI's own
// allocations as leaks in a sanitizer build, so it is off for MPI jobs, as in the other MPI
// tests (tests/comm/CMakeLists.txt).
inline const std::string kMpiEnv = "env ASAN_OPTIONS=detect_leaks=0 ";  // env: the commands are exec'd

// `origami` under mpirun with `np` ranks (the launcher of the MPI tests: the documented flags).
inline std::string mpi_origami(int np) {
  return kMpiEnv + std::string(ORIGAMI_BINARY_DIR) + "/tests/comm/origami_mpirun " +
         std::to_string(np) + " " + std::string(ORIGAMI_BINARY_DIR) + "/origami ";
}

// The origami program of this build.
inline std::string origami_bin() { return std::string(ORIGAMI_BINARY_DIR) + "/origami"; }

// True once `text` occurs in the file at `path`.
inline bool file_has(const std::string& path, const std::string& text) {
  return Process::read(path).find(text) != std::string::npos;
}

}  // namespace origami::fault_test
