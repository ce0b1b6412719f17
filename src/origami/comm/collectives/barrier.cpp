// Dissemination barrier.
//
// In round k = 0, 1, ... while 2^k < n, rank r sends an empty message to (r + 2^k) mod n and
// waits for one from (r - 2^k) mod n; after ceil(log2 n) rounds every rank has (transitively)
// heard from every other.
// Cost per rank: 0 bytes each way, in ceil(log2 n) messages each way.
#include "origami/comm/collectives/algorithms.h"

namespace origami::comm::detail {

void dissemination_barrier(CollectiveContext& c) {
  const int n = c.size();
  const int r = c.rank();
  for (int d = 1; d < n; d *= 2) {
    std::vector<Handle> hs;
    hs.push_back(c.recv(nullptr, 0, (r - d + n) % n));
    hs.push_back(c.send(nullptr, 0, (r + d) % n));
    c.wait_all(hs);
  }
}

}  // namespace origami::comm::detail
