#include "origami/train/rank_step.h"

namespace origami::parallel {

ParallelStepStats parallel_train_step(RankModel& model, AdamW& optimizer,
                                      const std::vector<LocalBatch>& micro, float lr,
                                      double max_grad_norm) {
  ParallelStepStats s;
  s.unmasked = model.global_unmasked(micro);
  // Mean over every unmasked label of the step, wherever it lives; none at all: loss 0, no
  // gradient (a rank with no unmasked labels of its own still gets the others' mean).
  const double scale = s.unmasked > 0 ? 1.0 / static_cast<double>(s.unmasked) : 0.0;
  zero_tensors(model.grads());
  const double local = model.accumulate(micro, scale);  // pipeline stages: the 1F1B order
  model.reduce_gradients();
  const double sum = model.global_loss_sum(local);  // collective: every rank calls it
  s.loss = s.unmasked > 0 ? sum / static_cast<double>(s.unmasked) : 0.0;
  s.grad_norm = model.grad_norm();
  // Loss and norm are global (all-reduced): every rank stops here together.
  check_step_finite(optimizer.steps_taken() + 1, s.loss, s.grad_norm);
  s.clip_coefficient =
      max_grad_norm > 0 ? clip_gradients(model.grads(), s.grad_norm, max_grad_norm) : 1.0f;
  optimizer.step(model.params(), model.grads(), lr);
  return s;
}

}  // namespace origami::parallel
