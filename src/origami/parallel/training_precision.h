// Where training's --precision bf16 runs (its policy: core/precision.h). The bf16 compute copy
// is read by the mesh strategy's blocks with whole weights and whole sequences only: one device
// (--strategy single) and data parallelism (--strategy dp, or a mesh whose only axis above 1 is
// dp). Tensor, sequence, TSP and pipeline layouts shard or move weights and activations through
// code that reads fp32 weights, so they are refused here, before anything is allocated.
#pragma once

#include "origami/core/precision.h"
#include "origami/model/config.h"
#include "origami/parallel/parallel_config.h"

namespace origami::parallel {

// ConfigError (exit 2) naming --precision and the layouts that run it, for a bf16 profile
// under any other layout or on a mixture-of-experts model; nothing for fp32.
void check_training_precision(const Precision& precision, const ParallelConfig& plan,
                              const ModelConfig& model);

}  // namespace origami::parallel
