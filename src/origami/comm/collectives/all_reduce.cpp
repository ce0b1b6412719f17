// All-reduce as ring reduce-scatter followed by ring all-gather (bandwidth-optimal).
//
// count elements of e bytes split into n blocks c_i = balanced_counts(count, n)[i] * e,
// T = count * e. The reduce-scatter runs in place on the output, then the all-gather
// distributes the reduced blocks.
// Cost per rank r (bytes):
//   sent     = (T - c_r) + (T - c_{(r+1) mod n})
//   received = (T - c_{(r-1) mod n}) + (T - c_r)
// (count a multiple of n: 2 (n-1)/n T each way).
// Staging (CommBuffers): two chunks of min(kReduceChunkBytes, max_i c_i) bytes.
#include <cstring>

#include "origami/comm/collectives/algorithms.h"
#include "origami/comm/communicator.h"

namespace origami::comm::detail {

void ring_all_reduce(CollectiveContext& c, const void* in, void* out, std::int64_t count,
                     const Reducer& red) {
  const std::int64_t total = count * red.elem_bytes;
  if (total > 0 && in != out) move_bytes(out, in, total);
  if (c.size() == 1) return;
  std::vector<std::int64_t> blocks = balanced_counts(count, c.size());
  for (auto& b : blocks) b *= red.elem_bytes;
  ring_reduce_scatter_inplace(c, out, blocks, red);
  const auto off = prefix_offsets(blocks);
  ring_all_gather(c, at(out, off[c.rank()]), out, blocks);
}

}  // namespace origami::comm::detail
