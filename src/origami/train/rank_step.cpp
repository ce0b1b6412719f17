#include "origami/train/rank_step.h"

#include <algorithm>

namespace origami::parallel {

AdamW make_rank_optimizer(RankModel& model, MemoryTracker& tracker, kernels::AdamWHyper hyper,
                          bool shard_optimizer) {
  if (shard_optimizer && model.groups().dp().size() > 1)
    return AdamW(model.params(), tracker, hyper, model.groups().dp());
  return AdamW(model.params(), tracker, hyper);
}

ParallelStepStats parallel_train_step(RankModel& model, AdamW& optimizer,
                                      const std::vector<LocalBatch>& micro, float lr,
                                      double max_grad_norm) {
  ParallelStepStats s;
  s.unmasked = model.global_unmasked(micro);
  // Mean over every unmasked label of the step, wherever it lives; none at all: loss 0, no
  // gradient (a rank with no unmasked labels of its own still gets the others' mean).
  const double scale = s.unmasked > 0 ? 1.0 / static_cast<double>(s.unmasked) : 0.0;
  zero_tensors(model.grads());
  // Pipeline stages run their 1F1B order; aux: a mixture of experts' load-balancing loss.
  RankModel::Accumulated acc = model.accumulate(micro, scale);
  // A sharded optimizer (ZeRO-1) owns one slice of each tensor over dp: the dp reduction
  // leaves each rank that slice, the norm and clipping read the slices, and AdamW::step
  // all-gathers the updated parameters over dp.
  const OptimizerSlices* slices = optimizer.sharded() ? &optimizer.slices() : nullptr;
  model.reduce_gradients(slices);
  model.wait_for_stages();  // pp: after the reductions, which overlap stages still running
  model.sum_over_stages(acc);  // pp: the aux and the expert load of every stage's layers
  s.moe = acc.moe;
  const double sum = model.global_loss_sum(acc.loss_sum);  // collective: every rank calls it
  s.loss = (s.unmasked > 0 ? sum / static_cast<double>(s.unmasked) : 0.0) + acc.aux;
  s.grad_norm = model.grad_norm(slices);
  // Loss and norm are global (all-reduced): every rank stops here together.
  check_step_finite(optimizer.steps_taken() + 1, s.loss, s.grad_norm);
  s.clip_coefficient =
      max_grad_norm <= 0 ? 1.0f
      : slices != nullptr
          ? clip_gradients(model.grads(), s.grad_norm, max_grad_norm, *slices)
          : clip_gradients(model.grads(), s.grad_norm, max_grad_norm);
  optimizer.step(model.params(), model.grads(), lr);
  model.refresh_compute_weights();  // bf16: the next step's linears read the stepped master
  return s;
}

}  // namespace origami::parallel
