// AdamW over the tensors a rank owns, and global-norm gradient clipping.
#pragma once

#include <cstdint>

#include "origami/kernels/optimizer.h"
#include "origami/model/weights.h"

namespace origami {

class AdamW {
 public:
  // Moments are allocated (zeroed) with the model's shapes, as optimizer state.
  AdamW(const ModelConfig& config, MemoryTracker& tracker, kernels::AdamWHyper hyper);
  // Moments with the shapes of `params` (a rank's shards: the optimizer state is sharded too).
  AdamW(ModelTensors& params, MemoryTracker& tracker, kernels::AdamWHyper hyper);

  // One step with learning rate `lr` (the schedule's value). Norm weights get no weight decay.
  void step(ModelTensors& params, ModelTensors& grads, float lr);

  std::int64_t steps_taken() const { return step_; }
  // A resumed run continues the bias correction where the checkpoint left it.
  void restore_steps_taken(std::int64_t steps) { step_ = steps; }
  const kernels::AdamWHyper& hyper() const { return hyper_; }
  ModelTensors& first_moment() { return m_; }
  ModelTensors& second_moment() { return v_; }

 private:
  kernels::AdamWHyper hyper_;
  ModelTensors m_;
  ModelTensors v_;
  std::int64_t step_ = 0;
};

// Euclidean norm of all gradients together (accumulated in double).
double global_grad_norm(ModelTensors& grads);
// Scales every gradient by clip_coefficient(norm, max_norm); returns the coefficient.
float clip_gradients(ModelTensors& grads, double norm, double max_norm);

// Throws Error when step `step`'s loss or gradient norm is not finite. Called before
// clipping and AdamW: one NaN gradient would reach every weight through the moments, and the
// next checkpoint would save that model as complete.
void check_step_finite(std::int64_t step, double loss, double grad_norm);

}  // namespace origami
