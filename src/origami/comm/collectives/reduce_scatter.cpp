// Ring reduce-scatter.
//
// n ranks, block c_i bytes destined for rank i, T = sum_i c_i. In step s = 0 .. n-2 rank r
// sends its partial sum of block (r - s - 1) mod n to rank r+1 and receives the partial sum
// of block (r - s - 2) mod n from rank r-1, adding its own contribution; after n-1 steps it
// holds the full reduction of block r.
// Cost per rank r (bytes):   sent = T - c_r     received = T - c_{(r-1) mod n}
// (equal blocks of c: (n-1) c each way), in n-1 messages each way.
// Staging (CommBuffers): two blocks of max_i c_i out of place, one in place.
#include <algorithm>
#include <cstring>

#include "origami/comm/collectives/algorithms.h"

namespace origami::comm::detail {

namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

void ring_reduce_scatter(CollectiveContext& c, const void* in, void* out,
                         const std::vector<std::int64_t>& block_bytes, const Reducer& red) {
  const int n = c.size();
  const int r = c.rank();
  const auto off = prefix_offsets(block_bytes);
  if (n == 1) {
    if (block_bytes[0] > 0 && out != in) std::memmove(out, in, block_bytes[0]);
    return;
  }
  const std::int64_t max_block = *std::max_element(block_bytes.begin(), block_bytes.end());
  Tensor stage[2] = {c.staging(max_block), c.staging(max_block)};
  const int next = (r + 1) % n;
  const int prev = mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    const int send_block = mod(r - s - 1, n);
    const int recv_block = mod(r - s - 2, n);
    const bool last = s == n - 2;
    // Step 0 sends the raw input; later steps forward the partial sum received just before.
    const void* src = s == 0 ? static_cast<const void*>(at(in, off[send_block])) : raw(stage[(s - 1) % 2]);
    void* dst = last ? out : raw(stage[s % 2]);
    std::vector<Handle> hs;
    hs.push_back(c.recv(dst, block_bytes[recv_block], prev));
    hs.push_back(c.send(src, block_bytes[send_block], next));
    c.wait_all(hs);
    red.combine(dst, at(in, off[recv_block]), block_bytes[recv_block] / red.elem_bytes);
  }
}

void ring_reduce_scatter_inplace(CollectiveContext& c, void* data, const std::vector<std::int64_t>& block_bytes,
                                 const Reducer& red) {
  const int n = c.size();
  const int r = c.rank();
  if (n == 1) return;
  const auto off = prefix_offsets(block_bytes);
  const std::int64_t max_block = *std::max_element(block_bytes.begin(), block_bytes.end());
  Tensor stage = c.staging(max_block);
  const int next = (r + 1) % n;
  const int prev = mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    const int send_block = mod(r - s - 1, n);
    const int recv_block = mod(r - s - 2, n);
    std::vector<Handle> hs;
    hs.push_back(c.recv(raw(stage), block_bytes[recv_block], prev));
    hs.push_back(c.send(at(data, off[send_block]), block_bytes[send_block], next));
    c.wait_all(hs);
    red.combine(at(data, off[recv_block]), raw(stage), block_bytes[recv_block] / red.elem_bytes);
  }
}

}  // namespace origami::comm::detail
