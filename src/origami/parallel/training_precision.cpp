#include "origami/parallel/training_precision.h"

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::parallel {

void check_training_precision(const Precision& precision, const ParallelConfig& plan,
                              const ModelConfig& model) {
  if (!precision.computes_in_bf16()) return;
  (void)plan;  // every layout runs it (the strategies read the compute copy)
  if (model.is_moe())
    throw ConfigError(
        "--precision bf16 trains dense models only (a mixture of experts' router "
        "and experts have no bf16 path yet): use --precision fp32");
}

}  // namespace origami::parallel
