#include "origami/model/weights.h"

#include <fmt/format.h>

#include "origami/core/rng.h"

namespace origami {

ModelTensors allocate_model_tensors(const ModelConfig& c, MemoryTracker& tracker,
                                    MemCategory category) {
  const std::int64_t h = c.hidden_size, f = c.intermediate_size, V = c.vocab_size;
  const std::int64_t qd = c.num_attention_heads * c.head_dim(), kvd = c.kv_dim();
  auto make = [&](Shape shape) { return Tensor(tracker, category, std::move(shape)); };
  ModelTensors t;
  t.embed = make({V, h});
  t.layers.reserve(static_cast<std::size_t>(c.num_hidden_layers));
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerTensors L;
    L.input_norm = make({h});
    L.wq = make({qd, h});
    L.wk = make({kvd, h});
    L.wv = make({kvd, h});
    L.wo = make({h, qd});
    L.post_norm = make({h});
    if (c.is_moe()) {
      L.router = make({c.num_local_experts, h});
      L.experts.resize(static_cast<std::size_t>(c.num_local_experts));
      for (ExpertTensors& e : L.experts) {
        e.w_gate = make({f, h});
        e.w_up = make({f, h});
        e.w_down = make({h, f});
      }
    } else {
      L.w_gate = make({f, h});
      L.w_up = make({f, h});
      L.w_down = make({h, f});
    }
    t.layers.push_back(std::move(L));
  }
  t.final_norm = make({h});
  t.tied = c.tie_word_embeddings;
  if (!t.tied) t.lm_head = make({V, h});
  return t;
}

std::vector<NamedTensor> named_tensors(ModelTensors& t) {
  std::vector<NamedTensor> out;
  out.push_back({"model.embed_tokens.weight", &t.embed, false});
  for (std::size_t l = 0; l < t.layers.size(); ++l) {
    LayerTensors& L = t.layers[l];
    const std::string p = fmt::format("model.layers.{}.", l);
    out.push_back({p + "input_layernorm.weight", &L.input_norm, true});
    out.push_back({p + "self_attn.q_proj.weight", &L.wq, false});
    out.push_back({p + "self_attn.k_proj.weight", &L.wk, false});
    out.push_back({p + "self_attn.v_proj.weight", &L.wv, false});
    out.push_back({p + "self_attn.o_proj.weight", &L.wo, false});
    out.push_back({p + "post_attention_layernorm.weight", &L.post_norm, true});
    if (L.experts.empty()) {
      out.push_back({p + "mlp.gate_proj.weight", &L.w_gate, false});
      out.push_back({p + "mlp.up_proj.weight", &L.w_up, false});
      out.push_back({p + "mlp.down_proj.weight", &L.w_down, false});
      continue;
    }
    out.push_back({p + "block_sparse_moe.gate.weight", &L.router, false});
    for (std::size_t e = 0; e < L.experts.size(); ++e) {
      const std::string q = fmt::format("{}block_sparse_moe.experts.{}.", p, e);
      out.push_back({q + "w1.weight", &L.experts[e].w_gate, false});
      out.push_back({q + "w3.weight", &L.experts[e].w_up, false});
      out.push_back({q + "w2.weight", &L.experts[e].w_down, false});
    }
  }
  out.push_back({"model.norm.weight", &t.final_norm, true});
  if (!t.tied) out.push_back({"lm_head.weight", &t.lm_head, false});
  return out;
}

ModelTensors undefined_like(const ModelTensors& like) {
  ModelTensors t;
  t.layers.resize(like.layers.size());
  for (std::size_t l = 0; l < like.layers.size(); ++l)
    t.layers[l].experts.resize(like.layers[l].experts.size());
  t.tied = like.tied;
  return t;
}

ModelTensors allocate_like(ModelTensors& like, MemoryTracker& tracker, MemCategory category,
                           DType dtype) {
  ModelTensors t = undefined_like(like);
  std::vector<NamedTensor> src = named_tensors(like), dst = named_tensors(t);
  for (std::size_t i = 0; i < src.size(); ++i)
    *dst[i].tensor = Tensor(tracker, category, dtype, src[i].tensor->shape());
  return t;
}

void initialize_parameters(ModelTensors& params, const ModelConfig& config, std::uint64_t seed) {
  for (NamedTensor& p : named_tensors(params)) {
    Tensor& t = *p.tensor;
    if (p.is_norm) {
      if (t.backed())
        for (float& x : t.span()) x = 1.0f;
    } else {
      rng::fill_normal_block(t, seed, p.name, t.shape(), Shape(t.shape().size(), 0),
                             config.initializer_range);
    }
  }
}

void zero_tensors(ModelTensors& tensors) {
  for (NamedTensor& p : named_tensors(tensors)) p.tensor->zero();
}

}  // namespace origami
