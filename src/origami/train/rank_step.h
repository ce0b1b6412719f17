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
  MoeLoad moe;  // a mixture of experts' load over the step (every rank); empty when dense
};

// The optimizer of a rank: AdamW over its shards, with `shard_optimizer` (--shard-optimizer,
// ZeRO-1) sharded over the dp axis (model/optimizer.h); at dp 1 there is nothing to shard and
// the optimizer is the unsharded one.
AdamW make_rank_optimizer(RankModel& model, MemoryTracker& tracker, kernels::AdamWHyper hyper,
                          bool shard_optimizer);

// One optimizer step over this rank's micro-batches: zero grads, forward+backward each (a
// pipeline stage: in its 1F1B order, RankModel::accumulate),
// reduce gradients, clip by the global norm (max_grad_norm <= 0: no clipping), AdamW on the
// rank's shards (sharded over dp: reduce-scatter, norm and AdamW on the slices, all-gather).
ParallelStepStats parallel_train_step(RankModel& model, AdamW& optimizer,
                                      const std::vector<LocalBatch>& micro, float lr,
                                      double max_grad_norm);

}  // namespace origami::parallel
