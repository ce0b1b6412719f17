#include "origami/model/llama.h"

#include "origami/kernels/cross_entropy.h"

namespace origami {

std::int64_t count_unmasked(const TokenBatch& b) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < b.batch * b.seq; ++i) n += b.labels[i] != kernels::kIgnoreLabel;
  return n;
}

LlamaModel::LlamaModel(const ModelConfig& config, MemoryTracker& tracker, std::uint64_t seed,
                       Recompute recompute)
    : config_(config),
      tracker_(tracker),
      params_((validate(config), allocate_model_tensors(config, tracker, MemCategory::Parameters))),
      grads_(allocate_model_tensors(config, tracker, MemCategory::Gradients)),
      ops_(config_, params_, grads_, tracker),
      driver_(config_, params_, grads_, ops_, tracker, recompute) {
  initialize_parameters(params_, config_, seed);
}

void check_documents(const TokenBatch& b, std::int64_t max_positions) {
  if ((b.documents == nullptr) != (b.positions == nullptr))
    throw ConfigError("a packed batch needs both its document ids and its positions");
  if (b.documents == nullptr) return;
  for (std::int64_t r = 0; r < b.batch; ++r) {
    const std::int32_t* doc = b.documents + r * b.seq;
    const std::int64_t* pos = b.positions + r * b.seq;
    for (std::int64_t s = 0; s < b.seq; ++s) {
      const bool same = s > 0 && doc[s] == doc[s - 1];
      const bool ok = s == 0 ? doc[0] == 0 && pos[0] >= 0
                             : (same ? pos[s] == pos[s - 1] + 1
                                     : doc[s] == doc[s - 1] + 1 && pos[s] == 0);
      if (!ok)
        throw ConfigError(fmt::format(
            "packed row {}, token {}: document {} at position {} (previous token: document {} at "
            "position {}); a row's documents count up from 0 by one and their positions from 0",
            r, s, doc[s], pos[s], s > 0 ? doc[s - 1] : -1, s > 0 ? pos[s - 1] : -1));
      if (pos[s] >= max_positions)
        throw ConfigError(fmt::format(
            "packed row {}, token {}: position {} is not below max_position_embeddings {}", r, s,
            pos[s], max_positions));
    }
  }
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
  check_documents(b, config_.max_position_embeddings);
}

LossResult LlamaModel::forward_backward(const TokenBatch& batch, double grad_scale,
                                        double aux_weight) {
  return run(batch, grad_scale, aux_weight, true);
}

LossResult LlamaModel::forward(const TokenBatch& batch) { return run(batch, 0.0, 0.0, false); }

LossResult LlamaModel::run(const TokenBatch& batch, double grad_scale, double aux_weight,
                           bool backward) {
  check_batch(batch);
  ops_.set_batch(batch.batch, batch.seq, batch.input_ids, batch.labels, batch.documents,
                 batch.positions);
  ops_.set_aux_weight(aux_weight);
  const kernels::LossSum loss = driver_.run(backward, grad_scale);
  return {loss.sum, loss.count, ops_.router_aux_loss(), ops_.moe_load()};
}

double training_flops(const ModelConfig& c, std::int64_t batch, std::int64_t seq) {
  const double h = static_cast<double>(c.hidden_size), f = static_cast<double>(c.intermediate_size);
  const double qd = static_cast<double>(c.num_attention_heads * c.head_dim());
  const double kvd = static_cast<double>(c.kv_dim());
  // A mixture-of-experts layer touches k experts and its router per token.
  const double mlp = c.is_moe() ? static_cast<double>(c.num_experts_per_tok) * 3 * h * f +
                                      h * static_cast<double>(c.num_local_experts)
                                : 3 * h * f;
  const double per_layer_matrix = h * qd + 2 * h * kvd + qd * h + mlp;
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
