// The packed shards the allgather schedule moves (TSP's packing, parallel/tsp_ops.h): a rank's
// attention shard P_r = [W_Q,r | W_K,r | W_V,r | W_O,r] and MLP shard M_r = [gate_r | up_r |
// down_r], each tensor's block stored contiguously one after the other; a gathered buffer
// holds rank j's at j·A (or j·M), and a gradient buffer the same layout. Weights are packed
// and gathered in their own dtype (bf16 under training's bf16 compute copy), gradients in fp32.
#pragma once

#include <array>
#include <vector>

#include "origami/core/float_ops.h"
#include "origami/model/blocks.h"
#include "origami/model/weights_bf16.h"
#include "origami/model/weights.h"
#include "origami/parallel/strategies/tsp_allgather/schedule.h"

namespace origami::parallel::tsp_allgather {

// The tensors of a layer's attention (or MLP) shard, in packing order.
inline std::vector<Tensor*> block_tensors(LayerTensors& L, bool attention) {
  if (attention) return {&L.wq, &L.wk, &L.wv, &L.wo};
  return {&L.w_gate, &L.w_up, &L.w_down};
}
inline std::vector<const Tensor*> block_tensors(const LayerTensors& L, bool attention) {
  if (attention) return {&L.wq, &L.wk, &L.wv, &L.wo};
  return {&L.w_gate, &L.w_up, &L.w_down};
}

// Packs the weights' tensors one after the other into out from element `first`, in their dtype.
inline void pack_shard(const LayerTensors& L, bool attention, Tensor& out, std::int64_t first) {
  std::int64_t at = first;
  for (const Tensor* t : block_tensors(L, attention)) {
    copy_elements(*t, 0, out, at, t->numel());
    at += t->numel();
  }
}

inline void add_packed(const float* packed, const std::vector<Tensor*>& tensors) {
  std::int64_t at = 0;
  for (Tensor* t : tensors) {
    add_floats(t->f32(), float_at(packed, at), t->numel());
    at += t->numel();
  }
}

// Where W_Q, W_K, W_V, W_O start in a head group's packed attention shard, and gate, up, down
// in an MLP column block's packed shard.
inline std::array<std::int64_t, 4> attention_offsets(const Shapes& s) {
  const std::int64_t h = s.hidden, qd = s.group_heads * s.head_dim,
                     kvd = s.group_kv_heads * s.head_dim;
  return {0, qd * h, (qd + kvd) * h, (qd + 2 * kvd) * h};
}
inline std::array<std::int64_t, 3> mlp_offsets(const Shapes& s) {
  const std::int64_t fh = s.group_ffn * s.hidden;
  return {0, fh, 2 * fh};
}
inline AttentionWeights attention_weights(kernels::WeightView p, const Shapes& s) {
  const auto o = attention_offsets(s);
  return {p.at(o[0]), p.at(o[1]), p.at(o[2]), p.at(o[3])};
}
inline AttentionGrads attention_grads(float* p, const Shapes& s) {
  const auto o = attention_offsets(s);
  return {float_at(p, o[0]), float_at(p, o[1]), float_at(p, o[2]), float_at(p, o[3])};
}
inline MlpWeights mlp_weights(kernels::WeightView p, const Shapes& s) {
  const auto o = mlp_offsets(s);
  return {p.at(o[0]), p.at(o[1]), p.at(o[2])};
}
inline MlpGrads mlp_grads(float* p, const Shapes& s) {
  const auto o = mlp_offsets(s);
  return {float_at(p, o[0]), float_at(p, o[1]), float_at(p, o[2])};
}

}  // namespace origami::parallel::tsp_allgather
