// A random permutation of 0 .. n-1 evaluated at one index in O(1) time and no memory: a
// 4-round Feistel network over the smallest 4^h >= n, rounds keyed by Philox, with cycle
// walking back into [0, n) (fewer than 4 steps on average). Used for the epoch order of the
// data (each window once per epoch, in an order keyed by the seed and the epoch): any rank can
// find the k-th window of any epoch without a shuffled table or a saved state.
#pragma once

#include <cstdint>

#include "origami/core/rng.h"

namespace origami::data {

// The image of `index` (< n) under the permutation of 0 .. n-1 that `key` selects.
std::uint64_t permute(std::uint64_t index, std::uint64_t n, rng::Key key);

}  // namespace origami::data
