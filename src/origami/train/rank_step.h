// One optimizer step of a rank of any layout (parallel/rank_model.h): the step-level order of
// the collectives every rank runs together.
#pragma once

#include <cstdint>
#include <vector>

#include "origami/model/optimizer.h"
#include "origami/parallel/rank_model.h"

namespace origami::parallel {

struct ParallelStepStats {
  double loss = 0;  // mean over the step's unmasked labels (every rank)
  std::int64_t unmasked = 0;
  double grad_norm = 0;
  float clip_coefficient = 1;
};

// One optimizer step over this rank's micro-batches: zero grads, forward+backward each (a
// pipeline stage: in its 1F1B order, RankModel::accumulate),
// reduce gradients, clip by the global norm (max_grad_norm <= 0: no clipping), AdamW on the
// rank's shards.
ParallelStepStats parallel_train_step(RankModel& model, AdamW& optimizer,
                                      const std::vector<LocalBatch>& micro, float lr,
                                      double max_grad_norm);

}  // namespace origami::parallel
