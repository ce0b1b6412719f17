#include "origami/model/optimizer.h"

#include <cmath>

#include <fmt/format.h>

#include "origami/core/dry_run.h"
#include "origami/core/error.h"
#include "origami/core/float_ops.h"

namespace origami {

std::int64_t OptimizerSlices::elements() const {
  std::int64_t n = 0;
  for (const std::int64_t c : count) n += c;
  return n;
}

OptimizerSlices optimizer_slices(ModelTensors& tensors, int parts, int part) {
  ORIGAMI_CHECK(parts >= 1 && part >= 0 && part < parts, "slice {} of {}", part, parts);
  OptimizerSlices s;
  for (const NamedTensor& t : named_tensors(tensors)) {
    const std::vector<std::int64_t> blocks = comm::balanced_counts(t.tensor->numel(), parts);
    std::int64_t off = 0;
    for (int i = 0; i < part; ++i) off += blocks[static_cast<std::size_t>(i)];
    s.offset.push_back(off);
    s.count.push_back(blocks[static_cast<std::size_t>(part)]);
  }
  return s;
}

namespace {

// The kernels on a gradient of either dtype (bf16 under --grad-reduce-dtype bf16), from element
// `off` for `n` elements.
void adamw_on(Tensor& p, Tensor& g, std::int64_t off, std::int64_t n, Tensor& m, Tensor& v,
              const kernels::AdamWHyper& hyper, std::int64_t step) {
  float* param = float_at(p.f32(), off);
  if (g.dtype() == DType::BF16)
    kernels::adamw_step(n, param, g.data<bf16>() + off, m.f32(), v.f32(), hyper, step);
  else
    kernels::adamw_step(n, param, float_at(g.f32(), off), m.f32(), v.f32(), hyper, step);
}

double squares_of(Tensor& g) {
  if (g.dtype() == DType::BF16) return kernels::sum_of_squares(g.numel(), g.data<bf16>());
  return kernels::sum_of_squares(g.numel(), g.f32());
}

void scale(Tensor& g, std::int64_t off, std::int64_t n, float coef) {
  if (g.dtype() == DType::BF16)
    kernels::scale_inplace(n, g.data<bf16>() + off, coef);
  else
    kernels::scale_inplace(n, float_at(g.f32(), off), coef);
}

// Moments of `slices.count[i]` elements per tensor, as 1-D tensors (a sharded optimizer's);
// a slice that is the whole tensor (dp 1) keeps the tensor's shape.
ModelTensors allocate_moment_slices(ModelTensors& params, const OptimizerSlices& slices,
                                    MemoryTracker& tracker) {
  ModelTensors t;
  t.layers.resize(params.layers.size());
  t.tied = params.tied;
  std::vector<NamedTensor> src = named_tensors(params), dst = named_tensors(t);
  for (std::size_t i = 0; i < dst.size(); ++i) {
    const bool whole = slices.count[i] == src[i].tensor->numel();
    *dst[i].tensor = Tensor(tracker, MemCategory::OptimizerState,
                            whole ? src[i].tensor->shape() : Shape{slices.count[i]});
  }
  return t;
}

}  // namespace

AdamW::AdamW(const ModelConfig& config, MemoryTracker& tracker, kernels::AdamWHyper hyper)
    : hyper_(hyper),
      m_(allocate_model_tensors(config, tracker, MemCategory::OptimizerState)),
      v_(allocate_model_tensors(config, tracker, MemCategory::OptimizerState)) {
  slices_ = optimizer_slices(m_, 1, 0);  // whole tensors
}

AdamW::AdamW(ModelTensors& params, MemoryTracker& tracker, kernels::AdamWHyper hyper)
    : hyper_(hyper),
      m_(allocate_like(params, tracker, MemCategory::OptimizerState)),
      v_(allocate_like(params, tracker, MemCategory::OptimizerState)) {
  slices_ = optimizer_slices(params, 1, 0);  // whole tensors
}

AdamW::AdamW(ModelTensors& params, MemoryTracker& tracker, kernels::AdamWHyper hyper,
             comm::Communicator dp)
    : hyper_(hyper),
      dp_(std::move(dp)),
      slices_(optimizer_slices(params, dp_.size(), dp_.rank())),
      m_(allocate_moment_slices(params, slices_, tracker)),
      v_(allocate_moment_slices(params, slices_, tracker)) {}

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
    adamw_on(*p[i].tensor, *g[i].tensor, slices_.offset[i], slices_.count[i], *m[i].tensor,
             *v[i].tensor, hyper, step_);
  }
  if (!sharded()) return;
  // Every dp rank updated its own slice: gather them, in place, into the full parameters
  // (the fp32 masters under every profile).
  const dryrun::MessagesAt fp32_masters(dryrun::MessageElement::Fp32);
  for (std::size_t i = 0; i < p.size(); ++i) {
    Tensor& t = *p[i].tensor;
    const comm::ConstBuffer mine(float_at(t.f32(), slices_.offset[i]), slices_.count[i],
                                 DType::F32);
    dp_.all_gatherv(mine, t, comm::balanced_counts(t.numel(), dp_.size()));
  }
}

std::vector<Tensor> AdamW::gather_moment(int which, ModelTensors& like,
                                         MemoryTracker& tracker) {
  ORIGAMI_CHECK(which == 0 || which == 1, "AdamW has two moments, not {}", which);
  std::vector<NamedTensor> shapes = named_tensors(like);
  std::vector<NamedTensor> held = named_tensors(which == 0 ? m_ : v_);
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    Tensor full(tracker, MemCategory::Workspace, shapes[i].tensor->shape());
    if (sharded())
      dp_.all_gatherv(*held[i].tensor, full, comm::balanced_counts(full.numel(), dp_.size()));
    else
      full.copy_from(*held[i].tensor);
    out.push_back(std::move(full));
  }
  return out;
}

void AdamW::adopt_moments(std::vector<Tensor>& first, std::vector<Tensor>& second) {
  std::vector<NamedTensor> m = named_tensors(m_), v = named_tensors(v_);
  ORIGAMI_CHECK(first.size() == m.size() && second.size() == m.size(),
                "{} and {} moments for {} tensors", first.size(), second.size(), m.size());
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (!sharded()) {
      std::swap(*m[i].tensor, first[i]);
      std::swap(*v[i].tensor, second[i]);
      continue;
    }
    for (auto [held, full] : {std::pair{m[i].tensor, &first[i]}, std::pair{v[i].tensor, &second[i]}}) {
      ORIGAMI_CHECK(full->numel() >= slices_.offset[i] + slices_.count[i],
                    "a moment of {} elements for a slice ending at {}", full->numel(),
                    slices_.offset[i] + slices_.count[i]);
      Tensor slice(*held->tracker(), MemCategory::OptimizerState, {slices_.count[i]});
      copy_floats(slice.f32(), float_at(full->f32(), slices_.offset[i]), slices_.count[i]);
      std::swap(*held, slice);
    }
  }
}

double global_grad_norm(ModelTensors& grads) {
  double sq = 0;
  for (const NamedTensor& g : named_tensors(grads)) sq += squares_of(*g.tensor);
  return std::sqrt(sq);
}

float clip_gradients(ModelTensors& grads, double norm, double max_norm) {
  const float coef = kernels::clip_coefficient(norm, max_norm);
  if (coef < 1.0f) {
    for (const NamedTensor& g : named_tensors(grads)) scale(*g.tensor, 0, g.tensor->numel(), coef);
  }
  return coef;
}

float clip_gradients(ModelTensors& grads, double norm, double max_norm,
                     const OptimizerSlices& slices) {
  const float coef = kernels::clip_coefficient(norm, max_norm);
  if (coef < 1.0f) {
    std::vector<NamedTensor> g = named_tensors(grads);
    for (std::size_t i = 0; i < g.size(); ++i)
      scale(*g[i].tensor, slices.offset[i], slices.count[i], coef);
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
