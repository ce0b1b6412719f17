// Pipeline parallelism's layer split: the pp mesh axis (outermost, parallel_config.h) cuts the
// L decoder layers into p x v contiguous model chunks, first to last (v = --pp-virtual, 1 by
// default). THE layer -> (rank, chunk) mapping, which every user goes through (PipelineSplit):
//   chunk c (0 .. p*v-1) holds the layers chunks[c]; it lives on pp rank c mod p, as that
//   rank's local chunk c / p (its chunks are r, r + p, ..., r + (v-1) p, first to last).
//   Chunk 0 (on rank 0) also holds the embedding, chunk p*v-1 (on the last rank) the final
//   norm and the LM head (with its loss).
// With v = 1 a chunk is a stage: rank s holds the layers of stage s (non-interleaved 1F1B);
// with v > 1 a micro-batch passes every rank v times (interleaved 1F1B, pipeline_schedule.h).
//
// The split is either given (--pp-layers 3,5: layers per chunk, first to last, p x v counts)
// or the balanced default over the p x v chunks: floor(L/n) layers on every chunk, and the
// L mod n extra layers one each to the interior chunks 1, 2, ... first (the two end chunks
// carry the embedding and the head besides their layers), then, when every interior chunk has
// one (L mod n = n - 1), to chunk 0: the last chunk's LM head GEMM (2 x tokens x h x V,
// forward, times 3 with backward) outweighs the embedding's row lookup. So n = 2, L = 5 gives
// 3,2; n = 3, L = 8 gives 3,3,2; n = 4, L = 6 gives 1,2,2,1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "origami/model/config.h"
#include "origami/parallel/parallel_config.h"

namespace origami::parallel {

// The layers [first, first + count) of one chunk (global layer indices).
struct StageLayers {
  std::int64_t first = 0;
  std::int64_t count = 0;
};

// The mapping stated above: p x v chunks of layers, chunk c on rank c mod p.
struct PipelineSplit {
  int stages = 1;          // p: the pp ranks
  int virtual_stages = 1;  // v: the chunks each rank holds
  std::vector<StageLayers> chunks;  // p x v, first to last

  int chunk_count() const { return stages * virtual_stages; }
  int rank_of_chunk(int chunk) const { return chunk % stages; }
  // Global chunk of rank `rank`'s local chunk `local` (0 .. v-1): local x p + rank.
  int chunk_of(int rank, int local) const { return local * stages + rank; }
  const StageLayers& layers_of(int rank, int local) const;
  // The chunk holding layer l (0 <= l < L).
  int chunk_of_layer(std::int64_t layer) const;
};

// "3,5" -> {3, 5}; "" -> {} (the balanced default). ConfigError naming --pp-layers and the
// offending item for anything but positive integers separated by commas.
std::vector<std::int64_t> parse_pp_layers(const std::string& text);

// The balanced default split of `layers` over `chunks` (the rule above); chunks <= layers.
std::vector<std::int64_t> balanced_stage_layers(std::int64_t layers, int chunks);

// Refuses up front (ConfigError naming what to change) a pipeline the model cannot be cut
// into: --pp-virtual below 1 (or above 1 without pp), more chunks (pp x --pp-virtual) than
// layers, or a --pp-layers whose count is not pp x --pp-virtual or whose sum is not L.
void check_pipeline_split(const ParallelConfig& plan, std::int64_t layers);

// Every chunk's layer range for this plan (plan.pp_layers, or the balanced default); checked
// as check_pipeline_split does.
PipelineSplit stage_layers(const ParallelConfig& plan, std::int64_t layers);

// The pp rank (stage) holding the tensor named `name` (a named_tensors() name): the embedding
// on rank 0 (chunk 0's), layer l's tensors on the rank of the chunk that holds l, the final
// norm and the LM head on the last rank (chunk p*v-1's).
int stage_of_tensor(const std::string& name, const PipelineSplit& split);

// Refuses what pipeline stages cannot run with yet, up front (ConfigError naming what to
// change): tied embeddings (the table would live on the first and the last stage at once).
void check_pipeline_model(const ParallelConfig& plan, const ModelConfig& model);

}  // namespace origami::parallel
