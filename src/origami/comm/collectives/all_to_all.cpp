// Pairwise all-to-all with variable counts.
//
// In step s = 1 .. n-1 rank r sends its block for rank (r + s) mod n and receives the block
// from rank (r - s) mod n, straight into place; its own block is copied locally. All steps
// are posted at once in that order (each pair's messages are distinct, so nothing waits on
// anything but its own data).
// Cost per rank r (bytes):   sent = sum_{j != r} send_j     received = sum_{i != r} recv_i
// in n-1 messages each way.
#include <cstring>

#include "origami/comm/collectives/algorithms.h"

namespace origami::comm::detail {

void pairwise_all_to_all(CollectiveContext& c, const void* in, const std::vector<std::int64_t>& send_bytes,
                         void* out, const std::vector<std::int64_t>& recv_bytes) {
  const int n = c.size();
  const int r = c.rank();
  const auto soff = prefix_offsets(send_bytes);
  const auto roff = prefix_offsets(recv_bytes);
  if (send_bytes[r] > 0) move_bytes(at(out, roff[r]), at(in, soff[r]), send_bytes[r]);
  std::vector<Handle> hs;
  for (int s = 1; s < n; ++s) {
    const int dst = (r + s) % n;
    const int src = (r - s + n) % n;
    hs.push_back(c.recv(at(out, roff[src]), recv_bytes[src], src));
    hs.push_back(c.send(at(in, soff[dst]), send_bytes[dst], dst));
  }
  c.wait_all(hs);
}

}  // namespace origami::comm::detail
