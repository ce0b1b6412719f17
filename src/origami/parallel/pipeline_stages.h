// Pipeline parallelism's layer split: the pp mesh axis (outermost, parallel_config.h) cuts the
// L decoder layers into pp contiguous stages, first to last. Stage 0 also holds the embedding,
// the last stage the final norm and the LM head (with its loss).
//
// The split is either given (--pp-layers 3,5: layers per stage, first to last) or the balanced
// default: floor(L/pp) layers on every stage, and the L mod pp extra layers one each to the
// interior stages 1, 2, ... first (the two end stages carry the embedding and the head besides
// their layers), then, when every interior stage has one (L mod pp = pp - 1), to stage 0: the
// last stage's LM head GEMM (2 x tokens x h x V, forward, times 3 with backward) outweighs
// the embedding's row lookup. So pp = 2, L = 5 gives 3,2; pp = 3, L = 8 gives 3,3,2;
// pp = 4, L = 6 gives 1,2,2,1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "origami/model/config.h"
#include "origami/parallel/parallel_config.h"

namespace origami::parallel {

// The layers [first, first + count) of one stage (global layer indices).
struct StageLayers {
  std::int64_t first = 0;
  std::int64_t count = 0;
};

// "3,5" -> {3, 5}; "" -> {} (the balanced default). ConfigError naming --pp-layers and the
// offending item for anything but positive integers separated by commas.
std::vector<std::int64_t> parse_pp_layers(const std::string& text);

// The balanced default split of `layers` over `stages` (the rule above); stages <= layers.
std::vector<std::int64_t> balanced_stage_layers(std::int64_t layers, int stages);

// Refuses up front (ConfigError naming what to change) a pipeline the model cannot be cut
// into: more stages than layers, or a --pp-layers whose count is not pp or whose sum is not L.
void check_pipeline_split(const ParallelConfig& plan, std::int64_t layers);

// Every stage's layer range for this plan (plan.pp_layers, or the balanced default); checked
// as check_pipeline_split does.
std::vector<StageLayers> stage_layers(const ParallelConfig& plan, std::int64_t layers);

// The stage holding the tensor named `name` (a named_tensors() name): the embedding on the
// first stage, layer l's tensors on the stage whose range holds l, the final norm and the LM
// head on the last.
int stage_of_tensor(const std::string& name, const std::vector<StageLayers>& stages);

// Refuses what pipeline stages cannot run with yet, up front (ConfigError naming what to
// change): tied embeddings (the table would live on the first and the last stage at once).
void check_pipeline_model(const ParallelConfig& plan, const ModelConfig& model);

}  // namespace origami::parallel
