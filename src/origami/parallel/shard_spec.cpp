#include "origami/parallel/shard_spec.h"

#include <cstring>

#include <fmt/format.h>

#include "origami/core/float_ops.h"
#include "origami/core/rng.h"
#include "origami/parallel/layout.h"

namespace origami::parallel {

std::vector<ShardSpec> make_shard_specs(const ModelConfig& c, int tp, int t) {
  check_tensor_split(c, tp, "tensor-parallel");
  const std::int64_t h = c.hidden_size, f = c.intermediate_size, V = c.vocab_size;
  const std::int64_t qd = c.num_attention_heads * c.head_dim(), kvd = c.kv_dim();
  const std::int64_t Vl = padded_vocab(V, tp) / tp;
  ModelTensors none;
  std::vector<ShardSpec> specs;
  auto rows = [&](std::string name, std::int64_t n, std::int64_t cols) {
    const Range r = even_range(n, tp, t);
    specs.push_back(
        {std::move(name), {n, cols}, {r.size(), cols}, {r.begin, 0}, 0, tp, false, {}, {}});
  };
  auto cols = [&](std::string name, std::int64_t nrows, std::int64_t n) {
    const Range r = even_range(n, tp, t);
    specs.push_back(
        {std::move(name), {nrows, n}, {nrows, r.size()}, {0, r.begin}, 1, tp, false, {}, {}});
  };
  auto vocab = [&](std::string name) {
    specs.push_back({std::move(name), {V, h}, {Vl, h}, {t * Vl, 0}, 0, tp, false, {}, {}});
  };
  // k/v proj: the rank's kv heads, or (more ranks than kv heads) the one kv head its query
  // heads use, held by `replicas` consecutive ranks.
  const int replicas = kv_replicas(c, tp);
  auto kv_rows = [&](std::string name) {
    const Range r = even_range(kvd, tp / replicas, t / replicas);
    specs.push_back(
        {std::move(name), {kvd, h}, {r.size(), h}, {r.begin, 0}, 0, tp, false, {}, {}});
    specs.back().replicas = replicas;
    specs.back().norm_counted = t % replicas == 0;
  };
  auto norm = [&](std::string name) {
    specs.push_back({std::move(name), {h}, {h}, {0}, -1, 1, true, {}, {}});
  };
  vocab("model.embed_tokens.weight");
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    norm(p + "input_layernorm.weight");
    rows(p + "self_attn.q_proj.weight", qd, h);
    kv_rows(p + "self_attn.k_proj.weight");
    kv_rows(p + "self_attn.v_proj.weight");
    cols(p + "self_attn.o_proj.weight", h, qd);
    norm(p + "post_attention_layernorm.weight");
    if (c.is_moe()) {  // the router replicated; each expert sharded as the dense MLP
      const std::int64_t E = c.num_local_experts;
      specs.push_back({p + "block_sparse_moe.gate.weight", {E, h}, {E, h}, {0, 0}, -1, 1, false,
                       {}, {}});
      for (std::int64_t e = 0; e < E; ++e) {
        const std::string q = fmt::format("{}block_sparse_moe.experts.{}.", p, e);
        rows(q + "w1.weight", f, h);
        rows(q + "w3.weight", f, h);
        cols(q + "w2.weight", h, f);
      }
      continue;
    }
    rows(p + "mlp.gate_proj.weight", f, h);
    rows(p + "mlp.up_proj.weight", f, h);
    cols(p + "mlp.down_proj.weight", h, f);
  }
  norm("model.norm.weight");
  if (!c.tie_word_embeddings) vocab("lm_head.weight");  // tied: embed_tokens' rows serve both
  return specs;
}

ModelTensors allocate_sharded(const ModelConfig& c, const std::vector<ShardSpec>& specs,
                              MemoryTracker& tracker, MemCategory category, DType dtype) {
  ModelTensors t;
  t.layers.resize(static_cast<std::size_t>(c.num_hidden_layers));
  for (LayerTensors& L : t.layers) L.experts.resize(static_cast<std::size_t>(c.num_local_experts));
  t.tied = c.tie_word_embeddings;
  std::vector<NamedTensor> named = named_tensors(t);
  ORIGAMI_CHECK(named.size() == specs.size(), "{} shard specs for {} model tensors", specs.size(),
                named.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    ORIGAMI_CHECK(named[i].name == specs[i].name, "shard spec {} is not tensor {}", specs[i].name,
                  named[i].name);
    *named[i].tensor = Tensor(tracker, category, dtype, specs[i].local);
  }
  return t;
}

void initialize_sharded(ModelTensors& params, const std::vector<ShardSpec>& specs,
                        const ModelConfig& config, std::uint64_t seed) {
  std::vector<NamedTensor> named = named_tensors(params);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const ShardSpec& s = specs[i];
    Tensor& t = *named[i].tensor;
    // Another pipeline stage's tensor, or another rank's whole expert: an empty block here.
    if (!s.on_stage || t.numel() == 0) continue;
    if (s.is_norm) {
      if (t.backed())
        for (float& x : t.span()) x = 1.0f;
      continue;
    }
    // Vocabulary blocks may run past V (padding): initialise only the rows that exist.
    const std::int64_t valid_rows =
        std::max<std::int64_t>(0, std::min(s.local[0], s.global[0] - s.offset[0]));
    if (valid_rows == s.local[0]) {
      rng::fill_normal_block(t, seed, s.name, s.global, s.offset, config.initializer_range);
    } else if (valid_rows > 0) {
      Tensor part(*t.tracker(), MemCategory::Workspace, {valid_rows, s.local[1]});
      rng::fill_normal_block(part, seed, s.name, s.global, s.offset, config.initializer_range);
      copy_floats(t.f32(), part.f32(), part.numel());
    }
  }
}

Tensor gather_full(const ShardSpec& s, const Tensor& local, comm::Communicator& tp,
                   MemoryTracker& tracker) {
  Tensor full(tracker, MemCategory::Workspace, s.global);
  if (s.owner >= 0) {  // whole on its owner, an empty block elsewhere
    if (tp.rank() == s.owner) full.copy_from(local);
    tp.broadcast(full, s.owner);
    return full;
  }
  if (s.shard_dim < 0 || s.parts == 1) {
    full.copy_from(local);
    return full;
  }
  ORIGAMI_CHECK(tp.size() == s.parts, "gathering {} sharded {} ways over an axis of {}", s.name,
                s.parts, tp.size());
  Tensor all(tracker, MemCategory::Workspace, {s.parts * local.numel()});
  tp.all_gather(local, all);
  const std::int64_t rows = s.local[0], cols = s.local[1];
  if (s.replicas > 1) {  // blocks of rows, each held by `replicas` ranks: take the first's
    ORIGAMI_CHECK(s.shard_dim == 0, "replicated column blocks of {}", s.name);
    for (int p = 0; p < s.parts; p += s.replicas)
      copy_floats(float_at(full.f32(), p / s.replicas * local.numel()),
                  float_at(all.f32(), p * local.numel()), local.numel());
  } else if (s.shard_dim == 0) {  // blocks of rows in rank order; drop the vocabulary padding
    copy_floats(full.f32(), all.f32(), full.numel());
  } else {  // blocks of columns: block p holds columns [p*cols, (p+1)*cols) of every row
    for (int p = 0; p < s.parts; ++p)
      for (std::int64_t r = 0; r < rows; ++r)
        copy_floats(float_at(full.f32(), r * s.global[1] + p * cols),
                    float_at(all.f32(), (p * rows + r) * cols), cols);
  }
  return full;
}

}  // namespace origami::parallel
