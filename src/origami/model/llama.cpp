#include "origami/model/llama.h"

#include <numeric>

#include "origami/kernels/cross_entropy.h"
#include "origami/kernels/embedding.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/rmsnorm.h"

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
MlpGrads mlp_grads(LayerTensors& G) { return {G.w_gate.f32(), G.w_up.f32(), G.w_down.f32()}; }

// n = x * rstd * w, recomputed in backward instead of saved.
void apply_saved_norm(std::int64_t rows, std::int64_t h, const float* x, const float* rstd,
                      const float* w, float* n) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float s = rstd[r];
    const float* xr = x + r * h;
    float* nr = n + r * h;
    for (std::int64_t i = 0; i < h; ++i) nr[i] = xr[i] * s * w[i];
  }
}

}  // namespace

std::int64_t count_unmasked(const TokenBatch& b) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < b.batch * b.seq; ++i) n += b.labels[i] != kernels::kIgnoreLabel;
  return n;
}

LlamaModel::LlamaModel(const ModelConfig& config, MemoryTracker& tracker, std::uint64_t seed)
    : config_(config),
      tracker_(tracker),
      params_((validate(config), allocate_model_tensors(config, tracker, MemCategory::Parameters))),
      grads_(allocate_model_tensors(config, tracker, MemCategory::Gradients)),
      rope_(make_rope_tables(config.max_position_embeddings, config.head_dim(), config.rope_theta,
                             tracker)) {
  initialize_parameters(params_, config_, seed);
}

void LlamaModel::check_batch(const TokenBatch& b) const {
  ORIGAMI_CHECK(b.batch >= 1 && b.seq >= 1, "a batch needs at least one sequence of one token "
                "(got {} x {})", b.batch, b.seq);
  if (b.seq > config_.max_position_embeddings) {
    throw ConfigError(fmt::format("sequence length {} exceeds max_position_embeddings {}; "
                                  "shorten --seq or raise max_position_embeddings",
                                  b.seq, config_.max_position_embeddings));
  }
  for (std::int64_t i = 0; i < b.batch * b.seq; ++i) {
    ORIGAMI_CHECK(b.input_ids[i] >= 0 && b.input_ids[i] < config_.vocab_size,
                  "token id {} at position {} is outside the vocabulary [0, {})", b.input_ids[i],
                  i, config_.vocab_size);
    ORIGAMI_CHECK(b.labels[i] == kernels::kIgnoreLabel ||
                      (b.labels[i] >= 0 && b.labels[i] < config_.vocab_size),
                  "label {} at position {} is outside the vocabulary [0, {}) and is not the "
                  "ignore label {}", b.labels[i], i, config_.vocab_size, kernels::kIgnoreLabel);
  }
}

LossResult LlamaModel::forward_backward(const TokenBatch& batch, double grad_scale) {
  return run(batch, grad_scale, true);
}

LossResult LlamaModel::forward(const TokenBatch& batch) { return run(batch, 0.0, false); }

LossResult LlamaModel::run(const TokenBatch& batch, double grad_scale, bool backward) {
  check_batch(batch);
  const ModelConfig& c = config_;
  const std::int64_t rows = batch.batch * batch.seq, h = c.hidden_size, V = c.vocab_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  auto act = [&](Shape s) { return Tensor(tracker_, MemCategory::Activations, std::move(s)); };
  auto work = [&](Shape s) { return Tensor(tracker_, MemCategory::Workspace, std::move(s)); };

  std::vector<std::int64_t> positions(static_cast<std::size_t>(batch.seq));
  std::iota(positions.begin(), positions.end(), 0);
  const AttentionDims adims{.batch = batch.batch, .seq = batch.seq, .hidden = h,
                            .heads = c.num_attention_heads, .kv_heads = c.num_key_value_heads,
                            .head_dim = c.head_dim()};
  const MlpDims mdims{.rows = rows, .hidden = h, .ffn = c.intermediate_size};

  // ---- forward: x is the residual stream.
  Tensor x = work({rows, h});
  kernels::embedding_forward(rows, h, batch.input_ids, params_.embed.f32(), 0, V, x.f32());
  std::vector<LayerSaved> saved(static_cast<std::size_t>(c.num_hidden_layers));
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerTensors& L = params_.layers[static_cast<std::size_t>(l)];
    LayerSaved s;
    s.x_in = x.clone(MemCategory::Activations);
    s.rstd1 = act({rows});
    {
      Tensor n = work({rows, h});
      kernels::rmsnorm_forward(rows, h, x.f32(), L.input_norm.f32(), eps, n.f32(), s.rstd1.f32());
      attention_block_forward(adims, n.f32(), attention_weights(L), positions.data(), rope_,
                              tracker_, s.attention, x.f32());
    }
    s.x_mid = x.clone(MemCategory::Activations);
    s.rstd2 = act({rows});
    {
      Tensor n = work({rows, h});
      kernels::rmsnorm_forward(rows, h, x.f32(), L.post_norm.f32(), eps, n.f32(), s.rstd2.f32());
      mlp_block_forward(mdims, n.f32(), mlp_weights(L), tracker_, s.mlp, x.f32());
    }
    if (backward) saved[static_cast<std::size_t>(l)] = std::move(s);
  }

  // ---- head and loss. The logits buffer becomes dlogits in place.
  Tensor rstd_f = act({rows});
  Tensor nf = work({rows, h});
  kernels::rmsnorm_forward(rows, h, x.f32(), params_.final_norm.f32(), eps, nf.f32(),
                           rstd_f.f32());
  Tensor logits(tracker_, MemCategory::Logits, {rows, V});
  kernels::linear_forward(rows, h, V, nf.f32(), params_.lm_head.f32(), logits.f32());
  Tensor lse = work({rows});
  const kernels::LossSum loss =
      kernels::cross_entropy_forward(rows, V, logits.f32(), batch.labels, lse.f32());
  const LossResult result{loss.sum, loss.count};
  if (!backward) return result;

  // ---- backward. dx is the gradient of the residual stream.
  kernels::cross_entropy_backward(rows, V, logits.f32(), 0, V, batch.labels, lse.f32(),
                                  static_cast<float>(grad_scale), logits.f32());
  Tensor dx = work({rows, h});
  {
    Tensor dnf = work({rows, h});
    kernels::linear_backward_weight(rows, h, V, logits.f32(), nf.f32(), grads_.lm_head.f32());
    kernels::linear_backward_input(rows, h, V, logits.f32(), params_.lm_head.f32(), dnf.f32());
    logits = Tensor();
    kernels::rmsnorm_backward(rows, h, x.f32(), params_.final_norm.f32(), rstd_f.f32(), dnf.f32(),
                              dx.f32(), grads_.final_norm.f32());
  }
  nf = Tensor();
  x = Tensor();
  for (std::int64_t l = c.num_hidden_layers - 1; l >= 0; --l) {
    const LayerTensors& L = params_.layers[static_cast<std::size_t>(l)];
    LayerTensors& G = grads_.layers[static_cast<std::size_t>(l)];
    LayerSaved& s = saved[static_cast<std::size_t>(l)];
    {  // MLP: dx already holds the gradient of the block's output (residual).
      Tensor n = work({rows, h});
      apply_saved_norm(rows, h, s.x_mid.f32(), s.rstd2.f32(), L.post_norm.f32(), n.f32());
      Tensor dn = work({rows, h});
      mlp_block_backward(mdims, n.f32(), mlp_weights(L), s.mlp, dx.f32(), tracker_, dn.f32(),
                         mlp_grads(G));
      s.mlp = MlpSaved();
      kernels::rmsnorm_backward(rows, h, s.x_mid.f32(), L.post_norm.f32(), s.rstd2.f32(),
                                dn.f32(), dx.f32(), G.post_norm.f32());
    }
    {  // Attention.
      Tensor n = work({rows, h});
      apply_saved_norm(rows, h, s.x_in.f32(), s.rstd1.f32(), L.input_norm.f32(), n.f32());
      Tensor dn = work({rows, h});
      attention_block_backward(adims, n.f32(), attention_weights(L), positions.data(), rope_,
                               s.attention, dx.f32(), tracker_, dn.f32(), attention_grads(G));
      kernels::rmsnorm_backward(rows, h, s.x_in.f32(), L.input_norm.f32(), s.rstd1.f32(),
                                dn.f32(), dx.f32(), G.input_norm.f32());
    }
    s = LayerSaved();  // free this layer's activations before the next one's backward
  }
  kernels::embedding_backward(rows, h, batch.input_ids, dx.f32(), 0, V, grads_.embed.f32());
  return result;
}

double training_flops(const ModelConfig& c, std::int64_t batch, std::int64_t seq) {
  const double h = static_cast<double>(c.hidden_size), f = static_cast<double>(c.intermediate_size);
  const double qd = static_cast<double>(c.num_attention_heads * c.head_dim());
  const double kvd = static_cast<double>(c.kv_dim());
  const double per_layer_matrix = h * qd + 2 * h * kvd + qd * h + 3 * h * f;
  const double matrix_params = static_cast<double>(c.num_hidden_layers) * per_layer_matrix +
                               h * static_cast<double>(c.vocab_size);  // LM head (not the lookup)
  const double tokens = static_cast<double>(batch * seq);
  const double pairs = static_cast<double>(seq) * static_cast<double>(seq + 1) / 2.0;
  const double attention_fwd = 4.0 * static_cast<double>(c.head_dim()) *
                               static_cast<double>(c.num_attention_heads) * pairs *
                               static_cast<double>(batch) *
                               static_cast<double>(c.num_hidden_layers);
  return 6.0 * matrix_params * tokens + 3.5 * attention_fwd;
}

}  // namespace origami
