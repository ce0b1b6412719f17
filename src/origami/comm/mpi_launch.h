// Building the mpirun command line with the flags that work on these machines (Open MPI 4.1):
//   --allow-run-as-root             when running as root (mpirun refuses otherwise)
//   --oversubscribe                 when more ranks than cores (mpirun refuses otherwise)
//   --bind-to none                  each rank has a progress (funnel) thread; binding a rank to
//                                   one core would make it share that core with its compute
//   --mca btl_vader_single_copy_mechanism none
//                                   NOT set by default: measured on these shared 2-core machines
//                                   the copy-in/copy-out path it selects needs both ranks polling
//                                   at once and ran 10-100x slower than the default CMA path
//                                   (docs/results-comm.md); set single_copy_none (or
//                                   ORIGAMI_MPI_SINGLE_COPY_NONE=1 for origami_mpirun) where it
//                                   helps (it was reported at ~52 GB/s at 1 MiB on idle hosts)
//   --hostfile FILE                 for a multi-node launch (docs/comm.md)
#pragma once

#include <string>
#include <vector>

namespace origami::comm {

struct MpirunOptions {
  std::string mpirun = "mpirun";
  std::string hostfile;          // empty: this machine only
  bool single_copy_none = false;  // --mca btl_vader_single_copy_mechanism none
  std::vector<std::string> extra;  // inserted before the program
};

std::vector<std::string> mpirun_command(int np, const std::vector<std::string>& program_and_args,
                                        const MpirunOptions& options = {});
// Quoted for a POSIX shell (for logs and docs).
std::string shell_join(const std::vector<std::string>& argv);

// True when this process is one rank of an mpirun launch (Open MPI's environment): training
// and generation then choose the MPI transport.
bool launched_by_mpirun();

}  // namespace origami::comm
