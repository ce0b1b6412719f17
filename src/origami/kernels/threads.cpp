// Minimal per-calling-thread kernel thread count, so that the attention branch links on its
// own. The kernels branch owns the real threads.cpp; this one behaves identically (a
// thread_local count defaulting to 1; setting it also sets OpenMP's count for this thread) and
// is to be replaced by it at merge.
#include "origami/kernels/threads.h"

#include <omp.h>

#include "origami/core/error.h"

namespace origami::kernels {
namespace {
thread_local int g_thread_count = 1;
}  // namespace

void set_thread_count(int n) {
  ORIGAMI_CHECK(n >= 1, "set_thread_count: need at least 1 thread, got {}", n);
  g_thread_count = n;
  omp_set_num_threads(n);
}

int thread_count() {
  return g_thread_count;
}

}  // namespace origami::kernels
