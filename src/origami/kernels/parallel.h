// Splitting a kernel's loop over the calling rank's threads (see threads.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "origami/kernels/threads.h"

namespace origami::kernels::detail {

// Calls body(begin, end) for consecutive ranges of [0, n) of `grain` items (the last may be
// shorter), spread over thread_count() OpenMP threads. The ranges do not depend on the thread
// count, so a body whose items are independent gives bitwise the same result for any count.
// body must not throw (an exception cannot leave an OpenMP region): check inputs before.
template <class Body>
void parallel_for(std::int64_t n, std::int64_t grain, const Body& body) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(1, grain);
  const std::int64_t chunks = (n + grain - 1) / grain;
  const int threads = static_cast<int>(std::min<std::int64_t>(thread_count(), chunks));
  if (threads <= 1) {
    for (std::int64_t c = 0; c < chunks; ++c) body(c * grain, std::min(n, (c + 1) * grain));
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) body(c * grain, std::min(n, (c + 1) * grain));
}

// A grain of rows such that each holds about `target` elements of `row_len` each.
inline std::int64_t rows_per_chunk(std::int64_t row_len, std::int64_t target = 16384) {
  return std::max<std::int64_t>(1, target / std::max<std::int64_t>(1, row_len));
}

}  // namespace origami::kernels::detail
