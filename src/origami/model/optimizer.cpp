#include "origami/model/optimizer.h"

#include <cmath>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami {

AdamW::AdamW(const ModelConfig& config, MemoryTracker& tracker, kernels::AdamWHyper hyper)
    : hyper_(hyper),
      m_(allocate_model_tensors(config, tracker, MemCategory::OptimizerState)),
      v_(allocate_model_tensors(config, tracker, MemCategory::OptimizerState)) {}

AdamW::AdamW(ModelTensors& params, MemoryTracker& tracker, kernels::AdamWHyper hyper)
    : hyper_(hyper),
      m_(allocate_like(params, tracker, MemCategory::OptimizerState)),
      v_(allocate_like(params, tracker, MemCategory::OptimizerState)) {}

void AdamW::step(ModelTensors& params, ModelTensors& grads, float lr) {
  ++step_;
  auto p = named_tensors(params);
  auto g = named_tensors(grads);
  auto m = named_tensors(m_);
  auto v = named_tensors(v_);
  for (std::size_t i = 0; i < p.size(); ++i) {
    kernels::AdamWHyper hyper = hyper_;
    hyper.lr = lr;
    if (p[i].is_norm) hyper.weight_decay = 0.0f;
    kernels::adamw_step(p[i].tensor->numel(), p[i].tensor->f32(), g[i].tensor->f32(),
                        m[i].tensor->f32(), v[i].tensor->f32(), hyper, step_);
  }
}

double global_grad_norm(ModelTensors& grads) {
  double sq = 0;
  for (const NamedTensor& g : named_tensors(grads))
    sq += kernels::sum_of_squares(g.tensor->numel(), g.tensor->f32());
  return std::sqrt(sq);
}

float clip_gradients(ModelTensors& grads, double norm, double max_norm) {
  const float coef = kernels::clip_coefficient(norm, max_norm);
  if (coef < 1.0f) {
    for (const NamedTensor& g : named_tensors(grads))
      kernels::scale_inplace(g.tensor->numel(), g.tensor->f32(), coef);
  }
  return coef;
}

void check_step_finite(std::int64_t step, double loss, double grad_norm) {
  if (std::isfinite(loss) && std::isfinite(grad_norm)) return;
  throw Error(fmt::format("step {}: the loss is {} and the gradient norm {}; the step was "
                          "stopped before the optimizer touched the weights — lower --lr or "
                          "check the data",
                          step, loss, grad_norm));
}

}  // namespace origami
