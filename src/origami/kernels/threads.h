// How many threads the kernels called from this thread may use. Per calling thread (a rank in
// the threads transport has its own), so D ranks in one process can split the cores.
#pragma once

namespace origami::kernels {

// Sets the kernel thread count of the calling thread (>= 1).
void set_thread_count(int n);
// The calling thread's kernel thread count (default: 1).
int thread_count();

}  // namespace origami::kernels
