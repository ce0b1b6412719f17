// origami_mpirun NP PROGRAM [ARGS...]: runs PROGRAM under mpirun with the flags that work
// here (origami::comm::mpirun_command), printing the command first. CTest's MPI tests and the
// benchmark driver use it. ORIGAMI_MPIRUN_HOSTFILE selects a hostfile;
// ORIGAMI_MPI_SINGLE_COPY_NONE=1 adds --mca btl_vader_single_copy_mechanism none.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "origami/comm/mpi_launch.h"

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
  if (const char* s = std::getenv("ORIGAMI_MPI_SINGLE_COPY_NONE")) opts.single_copy_none = std::string(s) == "1";
  const auto cmd = origami::comm::mpirun_command(np, std::vector<std::string>(argv + 2, argv + argc), opts);
  std::fprintf(stderr, "+ %s\n", origami::comm::shell_join(cmd).c_str());
  std::vector<char*> args;
  for (const auto& a : cmd) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  std::perror("origami_mpirun: execvp mpirun");
  return 127;
}
