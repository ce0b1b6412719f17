// Benchmarks that run several ranks on few cores: OpenMP's active waiting would let an idle
// rank's threads spin on the cores the others compute on, so the program re-executes itself
// with OMP_WAIT_POLICY=passive (it must be set before the OpenMP runtime starts).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace origami::bench {

inline void rerun_with_passive_omp_waits(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv);  // only returns on failure: then run as we are
  std::fprintf(stderr, "warning: could not re-execute with OMP_WAIT_POLICY=passive\n");
}

}  // namespace origami::bench
