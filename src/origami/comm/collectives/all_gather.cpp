// Ring all-gather (equal or variable counts).
//
// n ranks, block c_i bytes from rank i, T = sum_i c_i. In step s = 0 .. n-2 rank r sends
// block (r - s) mod n to rank r+1 and receives block (r - s - 1) mod n from rank r-1, straight
// into its place in the output (no staging).
// Cost per rank r (bytes):   sent = T - c_{(r+1) mod n}     received = T - c_r
// (equal blocks of c: (n-1) c each way), in n-1 messages each way.
#include <algorithm>
#include <cstring>

#include "origami/comm/collectives/algorithms.h"

namespace origami::comm::detail {

std::vector<std::int64_t> prefix_offsets(const std::vector<std::int64_t>& blocks) {
  std::vector<std::int64_t> off(blocks.size() + 1, 0);
  for (std::size_t i = 0; i < blocks.size(); ++i) off[i + 1] = off[i] + blocks[i];
  return off;
}

void ring_all_gather(CollectiveContext& c, const void* in, void* out,
                     const std::vector<std::int64_t>& block_bytes) {
  const int n = c.size();
  const int r = c.rank();
  const auto off = prefix_offsets(block_bytes);
  if (block_bytes[r] > 0 && at(out, off[r]) != in) move_bytes(at(out, off[r]), in, block_bytes[r]);
  const int next = (r + 1) % n;
  const int prev = (r - 1 + n) % n;
  for (int s = 0; s < n - 1; ++s) {
    const int send_block = ((r - s) % n + n) % n;
    const int recv_block = ((r - s - 1) % n + n) % n;
    std::vector<Handle> hs;
    hs.push_back(c.recv(at(out, off[recv_block]), block_bytes[recv_block], prev));
    hs.push_back(c.send(at(out, off[send_block]), block_bytes[send_block], next));
    c.wait_all(hs);
  }
}

}  // namespace origami::comm::detail
