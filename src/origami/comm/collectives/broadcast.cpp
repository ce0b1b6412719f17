// Pipelined chain broadcast.
//
// Ranks form a chain in order starting at the root (v = (r - root) mod n is the position);
// the buffer of B bytes moves in chunks of kPipelineChunkBytes, each rank forwarding chunk i
// while chunk i+1 arrives, so for large B the time approaches B / bandwidth + (n-2) chunks.
// Cost per rank (bytes):   sent = B if v < n-1 else 0     received = B if v > 0 else 0
// in max(1, ceil(B / chunk)) messages each (a zero-byte buffer still sends one empty message,
// so a count mismatch between ranks is detected).
#include <algorithm>

#include "origami/comm/collectives/algorithms.h"

namespace origami::comm::detail {

void chain_broadcast(CollectiveContext& c, void* data, std::int64_t bytes, int root) {
  const int n = c.size();
  if (n == 1) return;
  const int v = (c.rank() - root + n) % n;
  const int prev = (c.rank() - 1 + n) % n;
  const int next = (c.rank() + 1) % n;
  const std::int64_t chunks = std::max<std::int64_t>(1, (bytes + kPipelineChunkBytes - 1) / kPipelineChunkBytes);
  auto chunk_len = [&](std::int64_t i) { return std::min(kPipelineChunkBytes, bytes - i * kPipelineChunkBytes); };
  std::vector<Handle> recvs, sends;
  if (v > 0) {
    for (std::int64_t i = 0; i < chunks; ++i) recvs.push_back(c.recv(at(data, i * kPipelineChunkBytes), chunk_len(i), prev));
  }
  for (std::int64_t i = 0; i < chunks; ++i) {
    if (v > 0) c.wait(recvs[i]);
    if (v < n - 1) sends.push_back(c.send(at(data, i * kPipelineChunkBytes), chunk_len(i), next));
  }
  c.wait_all(sends);
}

}  // namespace origami::comm::detail
