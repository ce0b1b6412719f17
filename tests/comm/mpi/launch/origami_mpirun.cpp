// origami_mpirun NP PROGRAM [ARGS...]: runs PROGRAM under mpirun with the flags that work
// here (origami::comm::mpirun_command), printing the command first. CTest's MPI tests and the
// benchmark driver use it. ORIGAMI_MPIRUN_HOSTFILE selects a hostfile;
// ORIGAMI_MPI_SINGLE_COPY_NONE=1 adds --mca btl_vader_single_copy_mechanism none.
//
// Each launch gets a session-directory base of its own. Open MPI 4.1 keeps every job's session
// directory under one <tmpdir>/ompi.<host>.<uid> and removes that shared directory when a job
// ends with it empty; a job starting at that moment fails ("A call to mkdir was unable to create
// the desired directory", open-mpi/ompi#8510) — seen once in the suite, with other mpiruns on the
// machine. The base is <TMPDIR or /tmp>/origami-mpirun.<uid>/<pid> (exec keeps the pid, so it
// names mpirun); the bases of launches whose process has ended are removed at the next launch.
// A base the caller set (OMPI_MCA_orte_tmpdir_base) is kept; with a hostfile nothing is set.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "origami/comm/mpi_launch.h"

namespace {

namespace fs = std::filesystem;

bool process_exists(const std::string& name) {
  char* end = nullptr;
  const long pid = std::strtol(name.c_str(), &end, 10);
  if (end == name.c_str() || *end != '\0' || pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// Sets OMPI_MCA_orte_tmpdir_base to this launch's own directory; false (and a message) when it
// cannot be made, in which case mpirun runs with Open MPI's default.
bool use_own_session_base() {
  if (std::getenv("OMPI_MCA_orte_tmpdir_base") != nullptr) return true;
  const char* tmp = std::getenv("TMPDIR");
  const fs::path parent = fs::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") /
                          ("origami-mpirun." + std::to_string(::getuid()));
  if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) return false;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(parent, ec))
    if (!process_exists(e.path().filename().string())) fs::remove_all(e.path(), ec);
  const fs::path own = parent / std::to_string(::getpid());
  fs::remove_all(own, ec);  // a base left by an earlier process of this pid
  if (::mkdir(own.c_str(), 0700) != 0) return false;
  return ::setenv("OMPI_MCA_orte_tmpdir_base", own.c_str(), 1) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: origami_mpirun NP PROGRAM [ARGS...]\n");
    return 2;
  }
  const int np = std::atoi(argv[1]);
  if (np < 1) {
    std::fprintf(stderr, "origami_mpirun: NP must be a positive integer, got '%s'\n", argv[1]);
    return 2;
  }
  origami::comm::MpirunOptions opts;
  if (const char* h = std::getenv("ORIGAMI_MPIRUN_HOSTFILE")) opts.hostfile = h;
  if (const char* s = std::getenv("ORIGAMI_MPI_SINGLE_COPY_NONE"))
    opts.single_copy_none = std::string(s) == "1";
  const auto cmd =
      origami::comm::mpirun_command(np, std::vector<std::string>(argv + 2, argv + argc), opts);
  // (On this machine only: a hostfile's other hosts would not have the directory.)
  if (opts.hostfile.empty() && !use_own_session_base())
    std::fprintf(stderr,
                 "origami_mpirun: could not make a session directory of its own; "
                 "using Open MPI's default\n");
  std::fprintf(stderr, "+ %s\n", origami::comm::shell_join(cmd).c_str());
  std::vector<char*> args;
  for (const auto& a : cmd) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  std::perror("origami_mpirun: execvp mpirun");
  return 127;
}
