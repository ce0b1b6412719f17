// The collective algorithms, written once over point-to-point messages. Sizes are in bytes;
// block vectors give each rank's block. Each file's header states what every rank sends and
// receives; tests/comm/bytes_test.cpp checks the measured bytes against these formulas.
#pragma once

#include <cstdint>
#include <vector>

#include "origami/comm/collectives/context.h"
#include "origami/comm/reduce_op.h"

namespace origami::comm::detail {

// Offsets of consecutive blocks.
std::vector<std::int64_t> prefix_offsets(const std::vector<std::int64_t>& blocks);

void ring_all_gather(CollectiveContext& c, const void* in, void* out,
                     const std::vector<std::int64_t>& block_bytes);
void ring_reduce_scatter(CollectiveContext& c, const void* in, void* out,
                         const std::vector<std::int64_t>& block_bytes, const Reducer& red);
// In place over `data` (all blocks): afterwards block `rank` holds the reduction.
void ring_reduce_scatter_inplace(CollectiveContext& c, void* data, const std::vector<std::int64_t>& block_bytes,
                                 const Reducer& red);
void ring_all_reduce(CollectiveContext& c, const void* in, void* out, std::int64_t count,
                     const Reducer& red);
void chain_broadcast(CollectiveContext& c, void* data, std::int64_t bytes, int root);
void chain_reduce(CollectiveContext& c, const void* in, void* out, std::int64_t count, int root,
                  const Reducer& red);
void pairwise_all_to_all(CollectiveContext& c, const void* in, const std::vector<std::int64_t>& send_bytes,
                         void* out, const std::vector<std::int64_t>& recv_bytes);
void dissemination_barrier(CollectiveContext& c);

// Chunk size of the pipelined chain algorithms.
inline constexpr std::int64_t kPipelineChunkBytes = 512 << 10;
// Chunk size of the in-place ring reduce-scatter inside all-reduce.
inline constexpr std::int64_t kReduceChunkBytes = 1 << 20;

}  // namespace origami::comm::detail
