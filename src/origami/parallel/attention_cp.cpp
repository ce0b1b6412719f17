#include "origami/parallel/attention_cp.h"

#include <cmath>
#include <cstring>

#include "origami/core/float_ops.h"
#include "origami/kernels/attention.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/rope.h"

namespace origami::parallel {

using kernels::linear_backward_input;
using kernels::linear_backward_weight;
using kernels::linear_forward;

namespace {

// [Σ][B][Sl][w] (the order the axis gathers in) <-> [B][Σ*Sl][w] (the attention layout).
void rank_major_to_batch_major(int parts, std::int64_t B, std::int64_t Sl, std::int64_t w,
                               const float* in, float* out) {
  for (int r = 0; r < parts; ++r)
    for (std::int64_t b = 0; b < B; ++b)
      copy_floats(float_at(out, (b * parts + r) * Sl * w), float_at(in, (r * B + b) * Sl * w),
                  Sl * w);
}
void batch_major_to_rank_major(int parts, std::int64_t B, std::int64_t Sl, std::int64_t w,
                               const float* in, float* out) {
  for (int r = 0; r < parts; ++r)
    for (std::int64_t b = 0; b < B; ++b)
      copy_floats(float_at(out, (r * B + b) * Sl * w), float_at(in, (b * parts + r) * Sl * w),
                  Sl * w);
}

struct Gathered {
  Tensor k, v;  // [B, Σ*Sl, Kl*d]
};

Gathered gather_kv(const AttentionDims& d, const SequenceAxis& axis, const float* k,
                   const float* v, std::int64_t count, MemoryTracker& tracker) {
  const int parts = axis.comm->size();
  const std::int64_t kvd = d.kv_heads * d.head_dim;
  Gathered g{Tensor(tracker, MemCategory::CommBuffers, {d.batch, parts * d.seq, kvd}),
             Tensor(tracker, MemCategory::CommBuffers, {d.batch, parts * d.seq, kvd})};
  Tensor staging(tracker, MemCategory::CommBuffers, {parts * d.rows() * kvd});
  for (auto [local, out] : {std::pair{k, &g.k}, std::pair{v, &g.v}}) {
    axis.comm->all_gather(comm::ConstBuffer(local, count, DType::F32), staging);
    rank_major_to_batch_major(parts, d.batch, d.seq, kvd, staging.f32(), out->f32());
  }
  return g;
}

kernels::AttentionShape shape_of(const AttentionDims& d, int parts) {
  return {.batch = d.batch,
          .q_len = d.seq,
          .kv_len = parts * d.seq,
          .heads = d.heads,
          .kv_heads = d.kv_heads,
          .head_dim = d.head_dim};
}

}  // namespace

void cp_attention_forward(const AttentionDims& d, const float* n, const AttentionWeights& w,
                          const SequenceAxis& axis, const RopeTables& rope, MemoryTracker& tracker,
                          AttentionSaved& s, float* y) {
  const std::int64_t rows = d.rows(), qd = d.heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  s.q = Tensor(tracker, MemCategory::Activations, {rows, qd});
  s.k = Tensor(tracker, MemCategory::Activations, {rows, kvd});
  s.v = Tensor(tracker, MemCategory::Activations, {rows, kvd});
  s.out = Tensor(tracker, MemCategory::Activations, {rows, qd});
  s.lse = Tensor(tracker, MemCategory::Activations, {d.batch, d.heads, d.seq});
  cp_attention_forward_into(d, n, w, axis, rope, tracker,
                            {s.q.f32(), s.k.f32(), s.v.f32(), s.out.f32(), s.lse.f32()}, y);
}

void cp_attention_forward_into(const AttentionDims& d, const float* n, const AttentionWeights& w,
                               const SequenceAxis& axis, const RopeTables& rope,
                               MemoryTracker& tracker, const AttentionSavedView& s, float* y) {
  const std::int64_t rows = d.rows(), qd = d.heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  attention_project_into(d, n, w, axis.q_pos, rope, s.q, s.k, s.v);
  const Gathered g = gather_kv(d, axis, s.k, s.v, rows * kvd, tracker);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  kernels::attention_forward(shape_of(d, axis.comm->size()), s.q, g.k.f32(), g.v.f32(),
                             axis.q_pos, axis.kv_pos->data(), scale, s.out, s.lse);
  linear_forward(rows, qd, d.hidden, s.out, w.wo, y, /*accumulate=*/true);
}

void cp_attention_backward(const AttentionDims& d, const float* n, const AttentionWeights& w,
                           const SequenceAxis& axis, const RopeTables& rope,
                           const AttentionSaved& s, const float* dy, MemoryTracker& tracker,
                           float* dn, const AttentionGrads& g) {
  const int parts = axis.comm->size();
  const std::int64_t rows = d.rows(), qd = d.heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  Tensor dout = attention_output_backward(d, w, s, dy, tracker, g);
  Tensor dq(tracker, MemCategory::Workspace, {rows, qd});
  Tensor dk(tracker, MemCategory::Workspace, {rows, kvd});
  Tensor dv(tracker, MemCategory::Workspace, {rows, kvd});
  {
    const Gathered kv = gather_kv(d, axis, s.k.f32(), s.v.f32(), rows * kvd, tracker);
    Tensor dk_all(tracker, MemCategory::CommBuffers, {d.batch, parts * d.seq, kvd});
    Tensor dv_all(tracker, MemCategory::CommBuffers, {d.batch, parts * d.seq, kvd});
    const float scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
    kernels::attention_backward(shape_of(d, parts), s.q.f32(), kv.k.f32(), kv.v.f32(), axis.q_pos,
                                axis.kv_pos->data(), scale, s.out.f32(), s.lse.f32(), dout.f32(),
                                dq.f32(), dk_all.f32(), dv_all.f32());
    // dK/dV of every key go back to the rank that owns it, summed over the ranks' queries.
    Tensor staging(tracker, MemCategory::CommBuffers, {parts * rows * kvd});
    batch_major_to_rank_major(parts, d.batch, d.seq, kvd, dk_all.f32(), staging.f32());
    axis.comm->reduce_scatter(staging, dk);
    batch_major_to_rank_major(parts, d.batch, d.seq, kvd, dv_all.f32(), staging.f32());
    axis.comm->reduce_scatter(staging, dv);
  }
  dout = Tensor();
  attention_project_backward(d, n, w, axis.q_pos, rope, dq, dk, dv, dn, g);
}

}  // namespace origami::parallel
