// Facts of TSP's schedule that the engine (tsp_*.cpp) and the planner (plan/) both use, stated
// once here. (The per-block bytes and resident sets are still restated by plan/cost_model.cpp
// and plan/buffers.cpp, held equal to the engine by exact tests.)
#pragma once

#include <algorithm>
#include <cstdint>

namespace origami::parallel {

// The largest LM-head ring message (floats): the vocabulary ring moves each block in chunks of
// at most this many, so the head's buffers do not grow with V·h/D (tsp_head.cpp).
inline constexpr std::int64_t kHeadRingChunkFloats = std::int64_t{1} << 20;

// Vocabulary rows per LM-head ring message: a full chunk's rows for width h, at least one and
// at most the rank's vocabulary block.
inline std::int64_t tsp_head_chunk_rows(std::int64_t h, std::int64_t vocab_rows) {
  return std::clamp<std::int64_t>(kHeadRingChunkFloats / h, 1, vocab_rows);
}

}  // namespace origami::parallel
