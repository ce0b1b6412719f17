// Ring reduce-scatter.
//
// n ranks, block c_i bytes destined for rank i, T = sum_i c_i. In step s = 0 .. n-2 rank r
// sends its partial sum of block (r - s - 1) mod n to rank r+1 and receives the partial sum
// of block (r - s - 2) mod n from rank r-1, adding its own contribution; after n-1 steps it
// holds the full reduction of block r.
// Cost per rank r (bytes):   sent = T - c_r     received = T - c_{(r-1) mod n}
// (equal blocks of c: (n-1) c each way).
// Chunking (kReduceChunkBytes) bounds the staging to two slots of min(chunk, max_i c_i)
// bytes. Out of place, the ring runs once per chunk column: (n-1) * max(1, ceil(max_i c_i /
// chunk)) messages each way (exhausted blocks send empty ones). In place (all-reduce), each
// block moves in max(1, ceil(c_i / chunk)) messages per step.
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
    if (block_bytes[0] > 0 && out != in) move_bytes(out, in, block_bytes[0]);
    return;
  }
  // The ring runs once per chunk column j (chunk j of every block), so the partial sums in
  // flight are one chunk, not one block: staging is two chunks whatever the size.
  const std::int64_t chunk = std::max<std::int64_t>(red.elem_bytes, kReduceChunkBytes / red.elem_bytes * red.elem_bytes);
  const std::int64_t max_block = *std::max_element(block_bytes.begin(), block_bytes.end());
  const std::int64_t slot_bytes = std::min(chunk, max_block);
  Tensor stage = c.staging(2 * slot_bytes);
  auto slot = [&](int i) { return at(raw(stage), (i % 2) * slot_bytes); };
  const std::int64_t columns = std::max<std::int64_t>(1, (max_block + chunk - 1) / chunk);
  // Bytes of chunk j of block b (zero once the block is exhausted).
  auto len = [&](int b, std::int64_t j) {
    return std::clamp<std::int64_t>(block_bytes[b] - j * chunk, 0, chunk);
  };
  const int next = (r + 1) % n;
  const int prev = mod(r - 1, n);
  for (std::int64_t j = 0; j < columns; ++j) {
    for (int s = 0; s < n - 1; ++s) {
      const int send_block = mod(r - s - 1, n);
      const int recv_block = mod(r - s - 2, n);
      const bool last = s == n - 2;
      // Step 0 sends the raw input; later steps forward the partial sum received just before.
      const void* src = s == 0 ? static_cast<const void*>(at(in, off[send_block] + j * chunk)) : slot(s - 1);
      void* dst = last ? at(out, j * chunk) : slot(s);
      std::vector<Handle> hs;
      hs.push_back(c.recv(dst, len(recv_block, j), prev));
      hs.push_back(c.send(src, len(send_block, j), next));
      c.wait_all(hs);
      red.combine(dst, at(in, off[recv_block] + j * chunk), len(recv_block, j) / red.elem_bytes);
    }
  }
}

void ring_reduce_scatter_inplace(CollectiveContext& c, void* data, const std::vector<std::int64_t>& block_bytes,
                                 const Reducer& red) {
  const int n = c.size();
  const int r = c.rank();
  if (n == 1) return;
  const auto off = prefix_offsets(block_bytes);
  // Each block moves in chunks of whole elements through two staging slots, so the staging
  // stays small (and in cache) whatever the block size; the bytes are the same.
  const std::int64_t chunk = std::max<std::int64_t>(red.elem_bytes, kReduceChunkBytes / red.elem_bytes * red.elem_bytes);
  const std::int64_t max_block = *std::max_element(block_bytes.begin(), block_bytes.end());
  Tensor stage = c.staging(2 * std::min(chunk, max_block));
  const std::int64_t slot_bytes = std::min(chunk, max_block);
  auto slot = [&](std::int64_t j) { return at(raw(stage), (j % 2) * slot_bytes); };
  const int next = (r + 1) % n;
  const int prev = mod(r - 1, n);
  auto chunks_of = [&](std::int64_t bytes) { return std::max<std::int64_t>(1, (bytes + chunk - 1) / chunk); };
  auto len = [&](std::int64_t bytes, std::int64_t j) { return std::min(chunk, bytes - j * chunk); };
  for (int s = 0; s < n - 1; ++s) {
    const int send_block = mod(r - s - 1, n);
    const int recv_block = mod(r - s - 2, n);
    const std::int64_t sb = block_bytes[send_block], rb = block_bytes[recv_block];
    const std::int64_t ns = chunks_of(sb), nr = chunks_of(rb);
    std::vector<Handle> sends, recvs(static_cast<std::size_t>(nr));
    // The block being sent is not written in this step (the received one is), so all its
    // chunks can go at once.
    for (std::int64_t j = 0; j < ns; ++j) sends.push_back(c.send(at(data, off[send_block] + j * chunk), len(sb, j), next));
    for (std::int64_t j = 0; j < std::min<std::int64_t>(2, nr); ++j) recvs[j] = c.recv(slot(j), len(rb, j), prev);
    for (std::int64_t j = 0; j < nr; ++j) {
      c.wait(recvs[j]);
      red.combine(at(data, off[recv_block] + j * chunk), slot(j), len(rb, j) / red.elem_bytes);
      if (j + 2 < nr) recvs[j + 2] = c.recv(slot(j), len(rb, j + 2), prev);
    }
    c.wait_all(sends);
  }
}

}  // namespace origami::comm::detail
