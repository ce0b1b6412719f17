#include "origami/kernels/threads.h"

#include <omp.h>

#include "origami/core/error.h"

namespace origami::kernels {

namespace {
// Per calling thread: each rank of the threads transport is its own std::thread.
thread_local int t_thread_count = 1;
}  // namespace

void set_thread_count(int n) {
  ORIGAMI_CHECK(n >= 1, "kernel thread count must be >= 1, got {}", n);
  t_thread_count = n;
  // omp_set_num_threads sets the nthreads ICV of the calling thread only, so oneDNN's OpenMP
  // GEMM started from this thread uses n threads, and other ranks keep their own setting.
  omp_set_num_threads(n);
}

int thread_count() { return t_thread_count; }

}  // namespace origami::kernels
