// Simulated cluster hosts for the tests of MPI across hosts: a set of network namespaces made
// by scripts/netns-hosts.sh (one per host, a management and a data network between them), and
// the mpirun command line that starts ranks on them over TCP only. Each test takes a set ID
// of its own (a lock file held for its lifetime, so parallel ctest runs never share one) and
// removes the set when it ends.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "faults/process.h"
#include "origami/comm/mpi_launch.h"

namespace origami::netns_test {

struct Shell {
  int code = -1;
  std::string out;  // standard output and error
};

// Runs `command` under /bin/sh, capturing its output.
inline Shell shell(const std::string& command) {
  Shell r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> chunk;
  for (std::size_t n; (n = std::fread(chunk.data(), 1, chunk.size(), pipe)) > 0;) r.out.append(chunk.data(), n);
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline const std::string kScript = std::string(ORIGAMI_SOURCE_DIR) + "/scripts/netns-hosts.sh";
constexpr int kCannot = 77;  // netns-hosts.sh check: namespaces cannot be made here

class Hosts {
 public:
  // Why namespaces cannot be made here ("" when they can).
  static std::string unavailable() {
    const Shell c = shell(kScript + " check");
    if (c.code == 0) return "";
    return c.code == kCannot ? c.out : "netns-hosts.sh check failed (" + std::to_string(c.code) + "): " + c.out;
  }

  // Hosts 1..n of a set no other live test holds; up() reports whether they were made.
  explicit Hosts(int n) : n_(n) {
    for (int k = 0; k < 250 && lock_ < 0; ++k) {
      const int id = 1 + (static_cast<int>(::getpid()) + k) % 250;
      const std::string path = lock_path(id);
      const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) continue;
      // Ours if locked and still the file at that path (its last holder unlinks it).
      struct stat held {}, named {};
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &held) == 0 &&
          ::stat(path.c_str(), &named) == 0 && held.st_ino == named.st_ino) {
        id_ = id;
        lock_ = fd;
      } else {
        ::close(fd);
      }
    }
  }
  ~Hosts() {
    if (id_ < 0) return;
    shell(kScript + " down " + std::to_string(id_));
    ::unlink(lock_path(id_).c_str());
    ::close(lock_);
  }
  Hosts(const Hosts&) = delete;
  Hosts& operator=(const Hosts&) = delete;

  // Makes the hosts (replacing a set a killed test left behind); the script's output on failure.
  Shell up() const {
    if (id_ < 0) return {1, "no free namespace set ID (250 tests running?)"};
    return shell(kScript + " up " + std::to_string(id_) + " " + std::to_string(n_));
  }
  int id() const { return id_; }
  std::string ns(int host) const { return "og" + std::to_string(id_) + "h" + std::to_string(host); }
  // The address host `i` has on the data network (where the MPI traffic goes).
  std::string data_address(int host) const {
    return "10.232." + std::to_string(id_) + "." + std::to_string(host);
  }

  // Pulls (or plugs back) host `i`'s data cable.
  Shell link(int host, bool up) const {
    return shell(kScript + " link " + std::to_string(id_) + " " + std::to_string(host) +
                 (up ? " up" : " down"));
  }

  // The processes running in host `i`'s namespace.
  std::vector<pid_t> pids(int host) const {
    std::istringstream in(shell("ip netns pids " + ns(host)).out);
    std::vector<pid_t> out;
    for (long p; in >> p;) out.push_back(static_cast<pid_t>(p));
    return out;
  }

  // The command line running `program_and_args` (words without spaces) under mpirun with
  // `slots` ranks on each host, TCP only: origami::comm::mpirun_command (the flags the docs
  // give) plus netns-hosts.sh's; `extra_mca` e.g. "--mca btl_base_verbose 30".
  std::string mpirun(int slots, const std::string& program_and_args, const std::string& extra_mca = "") const {
    comm::MpirunOptions options;
    options.extra = words(shell(kScript + " mpirun " + std::to_string(id_) + " " + std::to_string(n_) +
                                " " + std::to_string(slots)).out + " " + extra_mca);
    return fault_test::kMpiEnv +
           comm::shell_join(comm::mpirun_command(n_ * slots, words(program_and_args), options));
  }

 private:
  // A set's claim: an flock on this file, held for the Hosts' lifetime (a killed test's set
  // is free again at once; its namespaces are replaced by the next up()).
  static std::string lock_path(int id) { return "/tmp/origami-netns-" + std::to_string(id) + ".lock"; }
  static std::vector<std::string> words(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
  }
  int n_;
  int id_ = -1;
  int lock_ = -1;
};

}  // namespace origami::netns_test
