// Attention, allgather schedule (schedule.h): layer l's whole attention weight [P_0..P_{D-1}]
// is taken from the prefetch (gathered while the previous block computed) and MLP l's gather
// started; then every head group j runs on the rank's own rows with the sequence-axis
// attention (attention_cp.h: its K/V all-gathered in rank order, local rows attended while the
// gather runs, the output projection of group j-1 in group j's gather window). Saved per group
// (group-major, as under the broadcast-ring schedule): q, k, v, out, lse of the rank's rows.
// Backward: the weights gathered again, each group's backward (K/V re-gathered, dK/dV
// reduce-scattered, attention_cp.h) writes its slot of the whole-weight gradient, which is
// then reduce-scattered to the owners (waited at the end of the next block).
#include <array>

#include "origami/kernels/gemm.h"
#include "origami/parallel/strategies/tsp_allgather/allgather_ops.h"
#include "origami/parallel/strategies/tsp_allgather/packing.h"

namespace origami::parallel {

namespace {

// Where head group j's slice of the group-major saved tensors q, k, v, out, lse starts.
std::array<std::int64_t, 5> slot_offsets(int j, const tsp_allgather::Shapes& sh,
                                         const AttentionDims& d) {
  const std::int64_t qd = sh.group_heads * sh.head_dim, kvd = sh.group_kv_heads * sh.head_dim;
  return {j * sh.rows * qd, j * sh.rows * kvd, j * sh.rows * kvd, j * sh.rows * qd,
          j * d.batch * d.heads * d.seq};
}
AttentionSavedView group_slot(AttentionSaved& s, const std::array<std::int64_t, 5>& o) {
  return {float_at(s.q.f32(), o[0]), float_at(s.k.f32(), o[1]), float_at(s.v.f32(), o[2]),
          float_at(s.out.f32(), o[3]), float_at(s.lse.f32(), o[4])};
}
AttentionSavedReadView group_slot(const AttentionSaved& s, const std::array<std::int64_t, 5>& o) {
  return {float_at(s.q.f32(), o[0]), float_at(s.k.f32(), o[1]), float_at(s.v.f32(), o[2]),
          float_at(s.out.f32(), o[3]), float_at(s.lse.f32(), o[4])};
}

}  // namespace

SequenceAxis TspAllgatherOps::sequence_axis() const {
  SequenceAxis axis;
  axis.comm = &axis_;
  axis.q_pos = query_positions();
  axis.kv_pos = &key_positions();
  axis.row_docs = row_documents(*batch_);
  axis.row_seq = layout_.seq();
  return axis;
}

void TspAllgatherOps::attention_forward(std::int64_t l, const float* n, AttentionSaved& s, float* x,
                                        const ForwardStep& step) {
  next_attention_layer_ = step.next_attention_layer;
  backward_recomputes_ = step.next_attention_layer == l;
  const Gathered w = take(Block::Attention, l);
  prefetch(Block::Mlp, l);  // the next block is always this layer's MLP
  const AttentionDims d = attention_dims();
  const tsp_allgather::Shapes sh = shapes();
  const int D = size_;
  const std::int64_t R = sh.rows, qd = d.heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  s.q = Tensor(tracker_, MemCategory::Activations, {D, R, qd});
  s.k = Tensor(tracker_, MemCategory::Activations, {D, R, kvd});
  s.v = Tensor(tracker_, MemCategory::Activations, {D, R, kvd});
  s.out = Tensor(tracker_, MemCategory::Activations, {D, R, qd});
  s.lse = Tensor(tracker_, MemCategory::Activations, {D, d.batch, d.heads, d.seq});
  const SequenceAxis axis = sequence_axis();
  auto weights = [&](int j) {
    return tsp_allgather::attention_weights(weight_view(w.all).at(j * sh.attention), sh);
  };
  auto project_out = [&](int j) {  // y += out_j W_O,j^T: head groups sum into x
    kernels::linear_forward(R, qd, d.hidden, group_slot(s, slot_offsets(j, sh, d)).out,
                            weights(j).wo, x, /*accumulate=*/true);
  };
  for (int j = 0; j < D; ++j) {
    const AttentionSavedView slot = group_slot(s, slot_offsets(j, sh, d));
    KvGatherInFlight kv = cp_attention_forward_begin(d, n, weights(j), axis, rope_, tracker_, slot);
    cp_attention_forward_finish(d, axis, tracker_, slot, kv, [&] {
      if (j > 0) project_out(j - 1);
    });
  }
  project_out(D - 1);
  finish_reduce_scatter();  // inside a full recompute: the previous block's gradient
}

void TspAllgatherOps::attention_backward(std::int64_t l, const float* n, const AttentionSaved& s,
                                         const float* dx, float* dn) {
  const Gathered w = take(Block::Attention, l);
  // The previous layer's backward starts with its recomputed attention forward (recompute
  // full) or with its MLP's backward.
  prefetch(backward_recomputes_ ? Block::Attention : Block::Mlp, l - 1);
  const AttentionDims d = attention_dims();
  const tsp_allgather::Shapes sh = shapes();
  Tensor grad(tracker_, MemCategory::CommBuffers, {size_ * sh.attention});
  grad.zero();
  const SequenceAxis axis = sequence_axis();
  for (int j = 0; j < size_; ++j) {
    cp_attention_backward(
        d, n, tsp_allgather::attention_weights(weight_view(w.all).at(j * sh.attention), sh), axis,
        rope_, group_slot(s, slot_offsets(j, sh, d)), dx, tracker_, dn,
        tsp_allgather::attention_grads(float_at(grad.f32(), j * sh.attention), sh));
  }
  reduce_scatter(Block::Attention, l, std::move(grad));
}

}  // namespace origami::parallel
