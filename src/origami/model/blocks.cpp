#include "origami/model/blocks.h"

#include <cmath>

#include "origami/kernels/attention.h"
#include "origami/kernels/convert.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/rope.h"
#include "origami/kernels/swiglu.h"

namespace origami {

using kernels::linear_backward_input;
using kernels::linear_backward_weight;
using kernels::linear_forward;

RopeTables make_rope_tables(std::int64_t max_pos, std::int64_t head_dim, double theta,
                            MemoryTracker& tracker, const RopeScaling& scaling) {
  RopeTables t{Tensor(tracker, MemCategory::Workspace, {max_pos, head_dim / 2}),
               Tensor(tracker, MemCategory::Workspace, {max_pos, head_dim / 2})};
  if (t.cos.backed())
    kernels::rope_table(max_pos, head_dim, theta, scaling, t.cos.f32(), t.sin.f32());
  return t;
}

RopeTables make_rope_tables(const ModelConfig& c, MemoryTracker& tracker) {
  return make_rope_tables(c.max_position_embeddings, c.head_dim(), c.rope_theta, tracker,
                          c.rope_scaling);
}

namespace {
kernels::AttentionShape attention_shape(const AttentionDims& d) {
  return {.batch = d.batch, .q_len = d.seq, .kv_len = d.seq, .heads = d.heads,
          .kv_heads = d.kv_heads, .head_dim = d.head_dim};
}
kernels::AttentionDocs attention_docs(const AttentionDims& d) {
  return {d.documents.ids, d.documents.ids};
}

// RoPE (or its transpose) on x [rows, heads*d]: at `pos` for every row, or at each row's own
// positions within its documents.
void rotate(const AttentionDims& d, std::int64_t heads, const std::int64_t* pos,
            const RopeTables& rope, bool backward, float* x) {
  const auto apply = backward ? kernels::rope_backward : kernels::rope_forward;
  if (d.documents.positions == nullptr) {
    apply(d.batch, d.seq, heads, d.head_dim, pos, rope.cos.f32(), rope.sin.f32(), x);
    return;
  }
  for (std::int64_t b = 0; b < d.batch; ++b)
    apply(1, d.seq, heads, d.head_dim, d.documents.positions + b * d.seq, rope.cos.f32(),
          rope.sin.f32(), x + b * d.seq * heads * d.head_dim);
}
}  // namespace

void attention_project_into(const AttentionDims& d, const float* n, const AttentionWeights& w,
                            const std::int64_t* pos, const RopeTables& rope, float* q, float* k,
                            float* v) {
  const std::int64_t rows = d.rows(), qd = d.heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  linear_forward(rows, d.hidden, qd, n, w.wq, q);
  linear_forward(rows, d.hidden, kvd, n, w.wk, k);
  linear_forward(rows, d.hidden, kvd, n, w.wv, v);
  rotate(d, d.heads, pos, rope, false, q);
  rotate(d, d.kv_heads, pos, rope, false, k);
  if (d.kv == DType::BF16) {
    kernels::round_floats_to_bf16(rows * kvd, k);
    kernels::round_floats_to_bf16(rows * kvd, v);
  }
}

void allocate_attention_saved(const AttentionDims& d, MemoryTracker& tracker, AttentionSaved& s) {
  const std::int64_t rows = d.rows(), qd = d.heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  s.q = Tensor(tracker, MemCategory::Activations, {rows, qd});
  s.k = Tensor(tracker, MemCategory::Activations, {rows, kvd});
  s.v = Tensor(tracker, MemCategory::Activations, {rows, kvd});
  s.out = Tensor(tracker, MemCategory::Activations, {rows, qd});
  s.lse = Tensor(tracker, MemCategory::Activations, {d.batch, d.heads, d.seq});
}

void attention_project_forward(const AttentionDims& d, const float* n, const AttentionWeights& w,
                               const std::int64_t* pos, const RopeTables& rope,
                               MemoryTracker& tracker, AttentionSaved& s) {
  allocate_attention_saved(d, tracker, s);
  attention_project_into(d, n, w, pos, rope, s.q.f32(), s.k.f32(), s.v.f32());
}

Tensor attention_output_backward(const AttentionDims& d, const AttentionWeights& w,
                                 const float* saved_out, const float* dy, MemoryTracker& tracker,
                                 const AttentionGrads& g) {
  const std::int64_t rows = d.rows(), qd = d.heads * d.head_dim;
  linear_backward_weight(rows, qd, d.hidden, dy, saved_out, g.wo, w.wo.dtype());
  Tensor dout(tracker, MemCategory::Workspace, {rows, qd});
  linear_backward_input(rows, qd, d.hidden, dy, w.wo, dout.f32());
  return dout;
}

void attention_project_backward_q(const AttentionDims& d, const float* n,
                                  const AttentionWeights& w, const std::int64_t* pos,
                                  const RopeTables& rope, float* dq, float* dn,
                                  const AttentionGrads& g) {
  const std::int64_t rows = d.rows(), qd = d.heads * d.head_dim;
  rotate(d, d.heads, pos, rope, true, dq);
  linear_backward_weight(rows, d.hidden, qd, dq, n, g.wq, w.wq.dtype());
  linear_backward_input(rows, d.hidden, qd, dq, w.wq, dn);
}

void attention_project_backward_kv(const AttentionDims& d, const float* n,
                                   const AttentionWeights& w, const std::int64_t* pos,
                                   const RopeTables& rope, float* dk, const float* dv, float* dn,
                                   const AttentionGrads& g) {
  const std::int64_t rows = d.rows(), kvd = d.kv_heads * d.head_dim;
  rotate(d, d.kv_heads, pos, rope, true, dk);
  linear_backward_weight(rows, d.hidden, kvd, dk, n, g.wk, w.wk.dtype());
  linear_backward_weight(rows, d.hidden, kvd, dv, n, g.wv, w.wv.dtype());
  linear_backward_input(rows, d.hidden, kvd, dk, w.wk, dn);
  linear_backward_input(rows, d.hidden, kvd, dv, w.wv, dn);
}

void attention_project_backward(const AttentionDims& d, const float* n, const AttentionWeights& w,
                                const std::int64_t* pos, const RopeTables& rope, Tensor& dq,
                                Tensor& dk, const Tensor& dv, float* dn, const AttentionGrads& g) {
  attention_project_backward_q(d, n, w, pos, rope, dq.f32(), dn, g);
  attention_project_backward_kv(d, n, w, pos, rope, dk.f32(), dv.f32(), dn, g);
}

void attention_block_forward(const AttentionDims& d, const float* n, const AttentionWeights& w,
                             const std::int64_t* pos, const RopeTables& rope,
                             MemoryTracker& tracker, AttentionSaved& s, float* y) {
  attention_project_forward(d, n, w, pos, rope, tracker, s);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  kernels::attention_forward(attention_shape(d), s.q.f32(), s.k.f32(), s.v.f32(), pos, pos,
                             attention_docs(d), scale, s.out.f32(), s.lse.f32());
  linear_forward(d.rows(), d.heads * d.head_dim, d.hidden, s.out.f32(), w.wo, y,
                 /*accumulate=*/true);
}

void attention_block_backward(const AttentionDims& d, const float* n, const AttentionWeights& w,
                              const std::int64_t* pos, const RopeTables& rope,
                              const AttentionSaved& s, const float* dy, MemoryTracker& tracker,
                              float* dn, const AttentionGrads& g) {
  const std::int64_t rows = d.rows(), qd = d.heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  Tensor dout = attention_output_backward(d, w, s.out.f32(), dy, tracker, g);
  Tensor dq(tracker, MemCategory::Workspace, {rows, qd});
  Tensor dk(tracker, MemCategory::Workspace, {rows, kvd});
  Tensor dv(tracker, MemCategory::Workspace, {rows, kvd});
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  kernels::attention_backward(attention_shape(d), s.q.f32(), s.k.f32(), s.v.f32(), pos, pos,
                              attention_docs(d), scale, s.out.f32(), s.lse.f32(), dout.f32(),
                              dq.f32(), dk.f32(), dv.f32());
  dout = Tensor();
  attention_project_backward(d, n, w, pos, rope, dq, dk, dv, dn, g);
}

void mlp_block_forward(const MlpDims& d, const float* n, const MlpWeights& w,
                       MemoryTracker& tracker, MlpSaved& s, float* y) {
  s.a = Tensor(tracker, MemCategory::Activations, {d.rows, d.ffn});
  s.u = Tensor(tracker, MemCategory::Activations, {d.rows, d.ffn});
  mlp_block_forward(d, n, w, tracker, MlpSlot{s.a.f32(), s.u.f32()}, y);
}

void mlp_block_forward(const MlpDims& d, const float* n, const MlpWeights& w,
                       MemoryTracker& tracker, const MlpSlot& s, float* y) {
  linear_forward(d.rows, d.hidden, d.ffn, n, w.w_gate, s.a);
  linear_forward(d.rows, d.hidden, d.ffn, n, w.w_up, s.u);
  Tensor gated(tracker, MemCategory::Workspace, {d.rows, d.ffn});
  kernels::swiglu_forward(d.rows * d.ffn, s.a, s.u, gated.f32());
  linear_forward(d.rows, d.ffn, d.hidden, gated.f32(), w.w_down, y, /*accumulate=*/true);
}

void mlp_block_recompute(const MlpDims& d, const float* n, const MlpWeights& w,
                         MemoryTracker& tracker, MlpSaved& s) {
  s.a = Tensor(tracker, MemCategory::Workspace, {d.rows, d.ffn});
  s.u = Tensor(tracker, MemCategory::Workspace, {d.rows, d.ffn});
  linear_forward(d.rows, d.hidden, d.ffn, n, w.w_gate, s.a.f32());
  linear_forward(d.rows, d.hidden, d.ffn, n, w.w_up, s.u.f32());
}

void mlp_block_backward(const MlpDims& d, const float* n, const MlpWeights& w,
                        const MlpSaved& s, const float* dy, MemoryTracker& tracker, float* dn,
                        const MlpGrads& g) {
  mlp_block_backward(d, n, w, MlpSavedView{s.a.f32(), s.u.f32()}, dy, tracker, dn, g);
}

void mlp_block_backward(const MlpDims& d, const float* n, const MlpWeights& w,
                        const MlpSavedView& s, const float* dy, MemoryTracker& tracker,
                        float* dn, const MlpGrads& g) {
  const std::int64_t elems = d.rows * d.ffn;
  {  // W_down's gradient needs the gated activations: recompute them.
    Tensor gated(tracker, MemCategory::Workspace, {d.rows, d.ffn});
    kernels::swiglu_forward(elems, s.a, s.u, gated.f32());
    linear_backward_weight(d.rows, d.ffn, d.hidden, dy, gated.f32(), g.w_down,
                           w.w_down.dtype());
  }
  Tensor dgated(tracker, MemCategory::Workspace, {d.rows, d.ffn});
  linear_backward_input(d.rows, d.ffn, d.hidden, dy, w.w_down, dgated.f32());
  Tensor da(tracker, MemCategory::Workspace, {d.rows, d.ffn});
  Tensor du(tracker, MemCategory::Workspace, {d.rows, d.ffn});
  kernels::swiglu_backward(elems, s.a, s.u, dgated.f32(), da.f32(), du.f32());
  dgated = Tensor();
  linear_backward_weight(d.rows, d.hidden, d.ffn, da.f32(), n, g.w_gate, w.w_gate.dtype());
  linear_backward_weight(d.rows, d.hidden, d.ffn, du.f32(), n, g.w_up, w.w_up.dtype());
  linear_backward_input(d.rows, d.hidden, d.ffn, da.f32(), w.w_gate, dn);
  linear_backward_input(d.rows, d.hidden, d.ffn, du.f32(), w.w_up, dn);
}

}  // namespace origami
