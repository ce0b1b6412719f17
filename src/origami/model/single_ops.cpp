#include "origami/model/single_ops.h"

#include <numeric>

#include "origami/kernels/embedding.h"
#include "origami/kernels/gemm.h"

namespace origami {

namespace {
AttentionWeights attention_weights(const LayerTensors& L) {
  return {L.wq.f32(), L.wk.f32(), L.wv.f32(), L.wo.f32()};
}
AttentionGrads attention_grads(LayerTensors& G) {
  return {G.wq.f32(), G.wk.f32(), G.wv.f32(), G.wo.f32()};
}
MlpWeights mlp_weights(const LayerTensors& L) {
  return {L.w_gate.f32(), L.w_up.f32(), L.w_down.f32()};
}
MlpGrads mlp_grads(LayerTensors& G) {
  return {G.w_gate.f32(), G.w_up.f32(), G.w_down.f32()};
}
}  // namespace

SingleOps::SingleOps(const ModelConfig& config, ModelTensors& params, ModelTensors& grads,
                     MemoryTracker& tracker)
    : config_(config),
      params_(params),
      grads_(grads),
      tracker_(tracker),
      rope_(make_rope_tables(config, tracker)),
      stats_(static_cast<std::size_t>(config.num_hidden_layers)) {}

double SingleOps::router_aux_loss() const {
  if (!config_.is_moe()) return 0.0;
  double sum = 0;
  for (const MoeStats& s : stats_) sum += s.balance;
  return config_.router_aux_loss_coef * sum / static_cast<double>(stats_.size());
}
MoeLoad SingleOps::moe_load() const {
  MoeLoad load;
  if (config_.is_moe())
    for (const MoeStats& s : stats_) load.add(s.tokens_per_expert, s.dropped);
  return load;
}

void SingleOps::set_batch(std::int64_t batch, std::int64_t seq, const std::int32_t* ids,
                          const std::int32_t* labels, const std::int32_t* documents,
                          const std::int64_t* positions) {
  batch_ = batch;
  seq_ = seq;
  ids_ = ids;
  labels_ = labels;
  documents_ = {documents, positions};
  positions_.resize(static_cast<std::size_t>(seq));
  std::iota(positions_.begin(), positions_.end(), 0);
}

AttentionDims SingleOps::attention_dims() const {
  return {.batch = batch_,
          .seq = seq_,
          .hidden = config_.hidden_size,
          .heads = config_.num_attention_heads,
          .kv_heads = config_.num_key_value_heads,
          .head_dim = config_.head_dim(),
          .documents = documents_};
}
MoeDims SingleOps::moe_dims() const {
  return {.rows = batch_ * seq_,
          .hidden = config_.hidden_size,
          .ffn = config_.intermediate_size,
          .experts = config_.num_local_experts,
          .top_k = config_.num_experts_per_tok,
          .capacity_factor = config_.moe_capacity_factor};
}
MlpDims SingleOps::mlp_dims() const {
  return {.rows = batch_ * seq_, .hidden = config_.hidden_size, .ffn = config_.intermediate_size};
}

void SingleOps::embed_forward(float* x) {
  kernels::embedding_forward(stream_rows(), config_.hidden_size, ids_, params_.embed.f32(), 0,
                             config_.vocab_size, x);
}
void SingleOps::embed_backward(const float* dx) {
  kernels::embedding_backward(stream_rows(), config_.hidden_size, ids_, dx, 0, config_.vocab_size,
                              grads_.embed.f32());
}

void SingleOps::attention_forward(std::int64_t l, const float* n, AttentionSaved& s, float* x,
                                  const ForwardStep& /*step*/) {
  attention_block_forward(attention_dims(), n,
                          attention_weights(params_.layers[static_cast<std::size_t>(l)]),
                          positions_.data(), rope_, tracker_, s, x);
}
void SingleOps::attention_backward(std::int64_t l, const float* n, const AttentionSaved& s,
                                   const float* dx, float* dn) {
  attention_block_backward(attention_dims(), n,
                           attention_weights(params_.layers[static_cast<std::size_t>(l)]),
                           positions_.data(), rope_, s, dx, tracker_, dn,
                           attention_grads(grads_.layers[static_cast<std::size_t>(l)]));
}

void SingleOps::mlp_forward(std::int64_t l, const float* n, MlpSaved& s, float* x) {
  if (config_.is_moe()) {
    moe_block_forward(moe_dims(), n, moe_weights(params_.layers[static_cast<std::size_t>(l)]),
                      tracker_, s, x, &stats_[static_cast<std::size_t>(l)]);
    return;
  }
  mlp_block_forward(mlp_dims(), n, mlp_weights(params_.layers[static_cast<std::size_t>(l)]),
                    tracker_, s, x);
}
void SingleOps::mlp_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dx,
                             float* dn) {
  if (config_.is_moe()) {
    const MoeWeights w = moe_weights(params_.layers[static_cast<std::size_t>(l)]);
    if (!s.router_logits.defined()) moe_block_recompute(moe_dims(), n, w, tracker_, s);
    // The loss holds coef x aux_weight x (mean over layers of each layer's balance).
    const double balance_grad = config_.router_aux_loss_coef * aux_weight_ /
                                static_cast<double>(config_.num_hidden_layers);
    moe_block_backward(moe_dims(), n, w, s, dx, balance_grad, tracker_, dn,
                       moe_grads(grads_.layers[static_cast<std::size_t>(l)]));
    s = MlpSaved();
    return;
  }
  const MlpWeights w = mlp_weights(params_.layers[static_cast<std::size_t>(l)]);
  if (!s.a.defined()) mlp_block_recompute(mlp_dims(), n, w, tracker_, s);
  mlp_block_backward(mlp_dims(), n, w, s, dx, tracker_, dn,
                     mlp_grads(grads_.layers[static_cast<std::size_t>(l)]));
  s = MlpSaved();
}

kernels::LossSum SingleOps::head_forward(const float* nf, bool with_backward) {
  const std::int64_t rows = stream_rows(), h = config_.hidden_size, V = config_.vocab_size;
  logits_ = Tensor(tracker_, MemCategory::Logits, {rows, V});
  kernels::linear_forward(rows, h, V, nf, params_.head().f32(), logits_.f32());
  lse_ = Tensor(tracker_, MemCategory::Workspace,
                {rows});  // as before the driver: not counted as saved
  const kernels::LossSum loss =
      kernels::cross_entropy_forward(rows, V, logits_.f32(), labels_, lse_.f32());
  head_input_ = nf;
  if (!with_backward) {
    logits_ = Tensor();
    lse_ = Tensor();
  }
  return loss;
}

void SingleOps::head_backward(float grad_scale, float* dnf) {
  ORIGAMI_CHECK(logits_.defined(), "head_backward without a head_forward that kept its state");
  const std::int64_t rows = stream_rows(), h = config_.hidden_size, V = config_.vocab_size;
  kernels::cross_entropy_backward(rows, V, logits_.f32(), 0, V, labels_, lse_.f32(), grad_scale,
                                  logits_.f32());
  kernels::linear_backward_weight(rows, h, V, logits_.f32(), head_input_, grads_.head().f32());
  kernels::linear_backward_input(rows, h, V, logits_.f32(), params_.head().f32(), dnf);
  logits_ = Tensor();
  lse_ = Tensor();
}

}  // namespace origami
