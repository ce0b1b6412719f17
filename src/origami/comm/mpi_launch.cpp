#include "origami/comm/mpi_launch.h"

#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "origami/core/error.h"

namespace origami::comm {

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr;
}

std::vector<std::string> mpirun_command(int np, const std::vector<std::string>& program_and_args,
                                        const MpirunOptions& options) {
  ORIGAMI_CHECK(np >= 1, "mpirun needs at least one rank, got {}", np);
  ORIGAMI_CHECK(!program_and_args.empty(), "mpirun needs a program");
  std::vector<std::string> cmd = {options.mpirun, "-np", std::to_string(np)};
  if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (options.hostfile.empty() && static_cast<unsigned>(np) > cores) cmd.push_back("--oversubscribe");
  if (!options.hostfile.empty()) {
    cmd.push_back("--hostfile");
    cmd.push_back(options.hostfile);
  }
  cmd.push_back("--bind-to");
  cmd.push_back("none");
  if (options.single_copy_none) {
    cmd.insert(cmd.end(), {"--mca", "btl_vader_single_copy_mechanism", "none"});
  }
  // Forward the communication timeout to remote nodes (local ranks inherit it anyway).
  if (std::getenv("ORIGAMI_COMM_TIMEOUT_S") != nullptr) cmd.insert(cmd.end(), {"-x", "ORIGAMI_COMM_TIMEOUT_S"});
  cmd.insert(cmd.end(), options.extra.begin(), options.extra.end());
  cmd.insert(cmd.end(), program_and_args.begin(), program_and_args.end());
  return cmd;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    const bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+") == std::string::npos;
    if (plain) {
      s += a;
    } else {
      s += '\'';
      for (char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
      s += '\'';
    }
  }
  return s;
}

}  // namespace origami::comm
