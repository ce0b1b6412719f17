// Where training's --precision bf16 runs (its policy: core/precision.h): every layout, since
// every strategy's blocks read the rank's bf16 compute copy (StrategyContext::matrices()) and
// TSP moves its shards in their dtype; a mixture of experts, whose router and experts have no
// bf16 path yet, is refused here, before anything is allocated.
#pragma once

#include "origami/core/precision.h"
#include "origami/model/config.h"
#include "origami/parallel/parallel_config.h"

namespace origami::parallel {

// ConfigError (exit 2) naming --precision, for a bf16 profile on a mixture-of-experts model;
// nothing otherwise (`plan`: every layout runs it).
void check_training_precision(const Precision& precision, const ParallelConfig& plan,
                              const ModelConfig& model);

}  // namespace origami::parallel
