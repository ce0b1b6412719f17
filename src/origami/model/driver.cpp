#include "origami/model/driver.h"

#include <fmt/format.h>

#include <vector>

#include "origami/core/error.h"
#include "origami/kernels/rmsnorm.h"
#include "origami/model/saved_dtype.h"

namespace origami {


namespace {
// n = x * rstd * w (the norm recomputed from the saved input instead of saved itself).
void apply_saved_norm(std::int64_t rows, std::int64_t h, const float* x, const float* rstd,
                      const float* w, float* n) {
  if (n == nullptr || x == nullptr || rstd == nullptr || w == nullptr) return;  // dry run
  for (std::int64_t r = 0; r < rows; ++r) {
    const float s = rstd[r];
    for (std::int64_t i = 0; i < h; ++i) n[r * h + i] = x[r * h + i] * s * w[i];
  }
}
}  // namespace

ModelDriver::ModelDriver(const ModelConfig& config, ModelTensors& params, ModelTensors& grads,
                         BlockOps& ops, MemoryTracker& tracker, Recompute recompute)
    : config_(config),
      params_(params),
      grads_(grads),
      ops_(ops),
      tracker_(tracker),
      recompute_(recompute) {}

void ModelDriver::layer_forward(std::int64_t l, Tensor& x, LayerSaved& s, Save save,
                                const ForwardStep& step) {
  const std::int64_t rows = ops_.stream_rows(), h = config_.hidden_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const LayerTensors& L = params_.layers[static_cast<std::size_t>(l)];
  const bool keep = save == Save::Policy || save == Save::All;
  const DType kept = ops_.activation_dtype();  // what is saved is held in it (saved_dtype.h)
  if (save != Save::Nothing) s.x_in = copy_in(kept, x, MemCategory::Activations);
  {
    Tensor rstd(tracker_, keep ? MemCategory::Activations : MemCategory::Workspace, {rows});
    Tensor n(tracker_, MemCategory::Workspace, {rows, h});
    kernels::rmsnorm_forward(rows, h, x.f32(), L.input_norm.f32(), eps, n.f32(), rstd.f32());
    ops_.attention_forward(l, n.f32(), s.attention, x.f32(), step);
    if (keep) {
      s.rstd1 = std::move(rstd);
      store_in(kept, s.attention);
    } else {
      s.attention = AttentionSaved();
    }
  }
  if (keep) s.x_mid = copy_in(kept, x, MemCategory::Activations);
  {
    Tensor rstd(tracker_, keep ? MemCategory::Activations : MemCategory::Workspace, {rows});
    Tensor n(tracker_, MemCategory::Workspace, {rows, h});
    kernels::rmsnorm_forward(rows, h, x.f32(), L.post_norm.f32(), eps, n.f32(), rstd.f32());
    ops_.mlp_forward(l, n.f32(), s.mlp, x.f32());
    if (keep) s.rstd2 = std::move(rstd);
    if (!keep || (save == Save::Policy && recompute_ == Recompute::Mlp)) s.mlp = MlpSaved();
    store_in(kept, s.mlp);
  }
}

void ModelDriver::layer_backward(std::int64_t l, LayerSaved& s, Tensor& dx) {
  const std::int64_t rows = ops_.stream_rows(), h = config_.hidden_size;
  const LayerTensors& L = params_.layers[static_cast<std::size_t>(l)];
  LayerTensors& G = grads_.layers[static_cast<std::size_t>(l)];
  if (!s.x_mid.defined()) {  // full recompute: re-run this layer's forward from its input
    Tensor x = copy_in(DType::F32, s.x_in, MemCategory::Workspace);
    LayerSaved again;
    layer_forward(l, x, again, Save::All, {.next_attention_layer = l});
    s = std::move(again);
  }
  if (staging_ != nullptr) staging_->open_layer(l);
  // What was saved, back in fp32 for the blocks (saved_dtype.h), as this backward's workspace.
  restore_f32(s.x_mid, MemCategory::Workspace);
  restore_f32(s.mlp, MemCategory::Workspace);
  {  // MLP: dx holds the gradient of the block's output (the residual).
    Tensor n(tracker_, MemCategory::Workspace, {rows, h});
    apply_saved_norm(rows, h, s.x_mid.f32(), s.rstd2.f32(), L.post_norm.f32(), n.f32());
    Tensor dn(tracker_, MemCategory::Workspace, {rows, h});
    ops_.mlp_backward(l, n.f32(), s.mlp, dx.f32(), dn.f32());
    s.mlp = MlpSaved();
    kernels::rmsnorm_backward(rows, h, s.x_mid.f32(), L.post_norm.f32(), s.rstd2.f32(), dn.f32(),
                              dx.f32(), G.post_norm.f32());
  }
  s.x_mid = Tensor();
  restore_f32(s.x_in, MemCategory::Workspace);
  restore_f32(s.attention, MemCategory::Workspace);
  {  // Attention.
    Tensor n(tracker_, MemCategory::Workspace, {rows, h});
    apply_saved_norm(rows, h, s.x_in.f32(), s.rstd1.f32(), L.input_norm.f32(), n.f32());
    Tensor dn(tracker_, MemCategory::Workspace, {rows, h});
    ops_.attention_backward(l, n.f32(), s.attention, dx.f32(), dn.f32());
    kernels::rmsnorm_backward(rows, h, s.x_in.f32(), L.input_norm.f32(), s.rstd1.f32(), dn.f32(),
                              dx.f32(), G.input_norm.f32());
  }
  s = LayerSaved();  // free this layer's activations before the next one's backward
  if (staging_ != nullptr) {
    ops_.settle_gradients();
    staging_->close_layer(l);
  }
}

void ModelDriver::layers_forward(std::int64_t first, std::int64_t last, Tensor& x,
                                 std::vector<LayerSaved>& saved, Save save) {
  for (std::int64_t l = first; l < last; ++l)
    layer_forward(l, x, saved[static_cast<std::size_t>(l - first)], save,
                  {.next_attention_layer = l + 1 < last ? l + 1 : -1});
}

Tensor ModelDriver::embed_and_layers(std::vector<LayerSaved>& saved, Save save) {
  Tensor x(tracker_, MemCategory::Workspace, {ops_.stream_rows(), config_.hidden_size});
  ops_.embed_forward(x.f32());
  layers_forward(0, config_.num_hidden_layers, x, saved, save);
  return x;
}

Tensor ModelDriver::forward_stream() {
  std::vector<LayerSaved> saved(static_cast<std::size_t>(config_.num_hidden_layers));
  return embed_and_layers(saved, Save::Nothing);
}

kernels::LossSum ModelDriver::run(bool backward, double grad_scale) {
  const std::int64_t layers = config_.num_hidden_layers;
  if (backward) {
    // The whole model as one stage; micro-batch id -1 is never a schedule's.
    constexpr int kWholeRun = -1;
    Tensor x, dx;
    try {
      const kernels::LossSum loss = stage_forward(kWholeRun, 0, layers, x);
      stage_backward(kWholeRun, grad_scale, dx);
      return loss;
    } catch (...) {
      in_flight_.erase(kWholeRun);  // a failed run leaves nothing in flight
      throw;
    }
  }
  const std::int64_t rows = ops_.stream_rows(), h = config_.hidden_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  std::vector<LayerSaved> saved(static_cast<std::size_t>(layers));
  Tensor x = embed_and_layers(saved, Save::Nothing);
  Tensor rstd_f(tracker_, MemCategory::Activations, {rows});
  Tensor nf(tracker_, MemCategory::Workspace, {rows, h});
  kernels::rmsnorm_forward(rows, h, x.f32(), params_.final_norm.f32(), eps, nf.f32(), rstd_f.f32());
  return ops_.head_forward(nf.f32(), false);
}

kernels::LossSum ModelDriver::stage_forward(int id, std::int64_t first, std::int64_t last,
                                            Tensor& x) {
  const std::int64_t rows = ops_.stream_rows(), h = config_.hidden_size;
  const std::int64_t layers = config_.num_hidden_layers;
  ORIGAMI_CHECK(0 <= first && first < last && last <= layers,
                "stage layers [{}, {}) of a model of {} layers", first, last, layers);
  ORIGAMI_CHECK(in_flight_.count(id) == 0, "micro-batch {} is already in flight on this stage",
                id);
  ORIGAMI_CHECK(first == 0 || x.numel() == rows * h,
                "stage input of {} values for {} rows of width {}", x.numel(), rows, h);
  StageSaved& s = in_flight_[id];
  s.first = first;
  s.last = last;
  s.layers.resize(static_cast<std::size_t>(last - first));
  const Save save = recompute_ == Recompute::Full ? Save::InputOnly : Save::Policy;
  if (first == 0) {
    x = Tensor(tracker_, MemCategory::Workspace, {rows, h});
    ops_.embed_forward(x.f32());
  }
  layers_forward(first, last, x, s.layers, save);
  if (last < layers) return {};
  const float eps = static_cast<float>(config_.rms_norm_eps);
  s.rstd_f = Tensor(tracker_, MemCategory::Activations, {rows});
  s.nf = Tensor(tracker_, MemCategory::Workspace, {rows, h});
  kernels::rmsnorm_forward(rows, h, x.f32(), params_.final_norm.f32(), eps, s.nf.f32(),
                           s.rstd_f.f32());
  s.x = std::move(x);  // the final norm's backward needs its input
  x = Tensor();
  return ops_.head_forward(s.nf.f32(), true);
}

void ModelDriver::stage_backward(int id, double grad_scale, Tensor& dx) {
  const std::int64_t rows = ops_.stream_rows(), h = config_.hidden_size;
  const auto found = in_flight_.find(id);
  ORIGAMI_CHECK(found != in_flight_.end(), "backward of micro-batch {}, which is not in flight",
                id);
  StageSaved& s = found->second;
  const bool last_stage = s.last == config_.num_hidden_layers;
  ORIGAMI_CHECK(last_stage || dx.numel() == rows * h,
                "stage output gradient of {} values for {} rows of width {}", dx.numel(), rows, h);
  if (last_stage) {
    dx = Tensor(tracker_, MemCategory::Workspace, {rows, h});
    Tensor dnf(tracker_, MemCategory::Workspace, {rows, h});
    if (staging_ != nullptr) staging_->open_head();
    ops_.head_backward(static_cast<float>(grad_scale), dnf.f32());
    kernels::rmsnorm_backward(rows, h, s.x.f32(), params_.final_norm.f32(), s.rstd_f.f32(),
                              dnf.f32(), dx.f32(), grads_.final_norm.f32());
    if (staging_ != nullptr) {
      ops_.settle_gradients();
      staging_->close_head();
    }
  }
  s.nf = Tensor();
  s.x = Tensor();
  for (std::int64_t l = s.last - 1; l >= s.first; --l)
    layer_backward(l, s.layers[static_cast<std::size_t>(l - s.first)], dx);
  if (s.first == 0) {
    if (staging_ != nullptr) staging_->open_embedding();
    ops_.embed_backward(dx.f32());
    if (staging_ != nullptr) {
      ops_.settle_gradients();
      staging_->close_embedding();
    }
  }
  in_flight_.erase(found);
}

}  // namespace origami
