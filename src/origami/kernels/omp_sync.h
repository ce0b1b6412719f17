// Keeps the OpenMP thread budget of the calling thread equal to its kernel thread count.
// A thread that never called set_thread_count still has OpenMP's default ICV (all cores);
// libraries that size their pools from omp_get_max_threads (oneDNN) must not see that.
#pragma once

#include <omp.h>

#include "origami/kernels/threads.h"

namespace origami::kernels::detail {

inline void sync_omp_threads() {
  const int n = thread_count();
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
}

}  // namespace origami::kernels::detail
