// Pipelined chain reduce (to a root).
//
// Ranks form a chain ending at the root: position v = (r - root) mod n; the rank at v = n-1
// starts, each rank adds its contribution to the partial result arriving from v+1 and
// forwards it to v-1, chunk by chunk (kPipelineChunkBytes), so chunk i is reduced and sent
// while chunk i+1 arrives. B = count * e bytes.
// Cost per rank (bytes):   sent = B if v > 0 else 0     received = B if v < n-1 else 0
// in max(1, ceil(B / chunk)) messages each.
// Staging (CommBuffers): up to kSlots chunks on ranks that receive.
#include <algorithm>
#include <cstring>

#include "origami/comm/collectives/algorithms.h"

namespace origami::comm::detail {

namespace {
constexpr std::int64_t kSlots = 4;
}

void chain_reduce(CollectiveContext& c, const void* in, void* out, std::int64_t count, int root,
                  const Reducer& red) {
  const int n = c.size();
  const std::int64_t bytes = count * red.elem_bytes;
  if (n == 1) {
    if (bytes > 0 && in != out) move_bytes(out, in, bytes);
    return;
  }
  const int v = (c.rank() - root + n) % n;
  const int to = (c.rank() - 1 + n) % n;    // towards the root
  const int from = (c.rank() + 1) % n;      // away from the root
  // Whole elements per chunk.
  const std::int64_t chunk = std::max<std::int64_t>(red.elem_bytes, kPipelineChunkBytes / red.elem_bytes * red.elem_bytes);
  const std::int64_t chunks = std::max<std::int64_t>(1, (bytes + chunk - 1) / chunk);
  auto len = [&](std::int64_t i) { return std::min(chunk, bytes - i * chunk); };
  const bool receives = v < n - 1;
  const bool sends = v > 0;
  const std::int64_t slots = std::min(kSlots, chunks);
  Tensor stage = receives ? c.staging(slots * std::min(chunk, std::max<std::int64_t>(bytes, 0))) : Tensor();
  const std::int64_t slot_bytes = std::min(chunk, bytes);
  auto slot = [&](std::int64_t i) { return at(raw(stage), (i % slots) * slot_bytes); };
  std::vector<Handle> recvs(static_cast<std::size_t>(chunks)), sendh(static_cast<std::size_t>(chunks));
  if (receives) {
    for (std::int64_t i = 0; i < slots; ++i) recvs[i] = c.recv(slot(i), len(i), from);
  }
  for (std::int64_t i = 0; i < chunks; ++i) {
    const void* payload = at(in, i * chunk);
    if (receives) {
      c.wait(recvs[i]);
      if (v == 0) {
        // The root adds the arriving partial result to its own input, into the output.
        void* dst = at(out, i * chunk);
        if (dst != payload) move_bytes(dst, payload, len(i));
        red.combine(dst, slot(i), len(i) / red.elem_bytes);
      } else {
        red.combine(slot(i), payload, len(i) / red.elem_bytes);
        payload = slot(i);
      }
    }
    if (sends) sendh[i] = c.send(payload, len(i), to);
    if (receives && i + slots < chunks) {
      // The slot is reused for chunk i + slots once chunk i has left it.
      if (sends) c.wait(sendh[i]);
      recvs[i + slots] = c.recv(slot(i), len(i + slots), from);
    }
  }
  c.wait_all(sendh);
}

}  // namespace origami::comm::detail
