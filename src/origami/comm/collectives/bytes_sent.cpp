#include "origami/comm/collectives/bytes_sent.h"

namespace origami::comm {

std::int64_t ring_blocks_sent(std::int64_t block_bytes, int n) {
  return n > 1 ? static_cast<std::int64_t>(n - 1) * block_bytes : 0;
}

std::int64_t ring_all_reduce_sent(std::int64_t count, int n, int r, std::int64_t elem) {
  if (n <= 1) return 0;
  // Block i of balanced_counts(count, n): the first count % n blocks hold one more element.
  const auto block = [&](int i) { return count / n + (i < count % n ? 1 : 0); };
  return (2 * count - block(r) - block((r + 1) % n)) * elem;
}

}  // namespace origami::comm
