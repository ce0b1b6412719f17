// What one rank sends in the ring collectives (ring_all_gather, ring_reduce_scatter,
// ring_all_reduce in algorithms.h), stated once for the strategies' schedules and the planner;
// BytesSent in tests/comm/collectives_test.cpp holds it to the algorithms' measured bytes.
#pragma once

#include <cstdint>

namespace origami::comm {

// An all-gather or a reduce-scatter of n equal blocks of block_bytes: n-1 blocks from every rank.
std::int64_t ring_blocks_sent(std::int64_t block_bytes, int n);

// An all-reduce of `count` elements of `elem` bytes on rank r of n, in the blocks c_i of
// balanced_counts(count, n): (count - c_r) + (count - c_{r+1 mod n}) elements.
std::int64_t ring_all_reduce_sent(std::int64_t count, int n, int r, std::int64_t elem);

}  // namespace origami::comm
