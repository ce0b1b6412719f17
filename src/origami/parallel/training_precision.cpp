#include "origami/parallel/training_precision.h"

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::parallel {

void check_training_precision(const Precision& precision, const ParallelConfig& plan,
                              const ModelConfig& model) {
  if (!precision.computes_in_bf16()) return;
  if (plan.tp > 1 || plan.sp > 1 || plan.tsp > 1 || plan.pp > 1)
    throw ConfigError(fmt::format(
        "--precision bf16 trains under --strategy single and --strategy dp only (every weight "
        "whole on each rank); {} shards or moves weights or tokens: use --precision fp32 there",
        plan.describe()));
  if (model.is_moe())
    throw ConfigError(
        "--precision bf16 trains dense models only (a mixture of experts' router "
        "and experts have no bf16 path yet): use --precision fp32");
}

}  // namespace origami::parallel
