// Building the mpirun command line with the flags that work on these machines (Open MPI 4.1):
//   --allow-run-as-root             when running as root (mpirun refuses otherwise)
//   --oversubscribe                 when more ranks than cores (mpirun refuses otherwise)
//   --bind-to none                  each rank has a progress (funnel) thread; binding a rank to
//                                   one core would make it share that core with its compute
//   --mca btl_vader_single_copy_mechanism none
//                                   the default CMA single-copy path measured slower here; the
//                                   copy-in/copy-out path is faster (docs/results-comm.md)
//   --hostfile FILE                 for a multi-node launch (docs/comm.md)
#pragma once

#include <string>
#include <vector>

namespace origami::comm {

struct MpirunOptions {
  std::string mpirun = "mpirun";
  std::string hostfile;          // empty: this machine only
  bool single_copy_none = true;  // --mca btl_vader_single_copy_mechanism none
  std::vector<std::string> extra;  // inserted before the program
};

std::vector<std::string> mpirun_command(int np, const std::vector<std::string>& program_and_args,
                                        const MpirunOptions& options = {});
// Quoted for a POSIX shell (for logs and docs).
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace origami::comm
