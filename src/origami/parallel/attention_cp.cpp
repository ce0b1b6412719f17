#include "origami/parallel/attention_cp.h"

#include <cmath>
#include <tuple>

#include "origami/core/float_ops.h"
#include "origami/kernels/attention.h"
#include "origami/kernels/convert.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/rope.h"

namespace origami::parallel {

using kernels::linear_backward_input;
using kernels::linear_backward_weight;
using kernels::linear_forward;

namespace {

// out[0, n) = in[at, at + n), an fp32 or (a bf16 gather's) bf16 tensor, widened exactly.
void widen_into(float* out, const Tensor& in, std::int64_t at, std::int64_t n) {
  if (out == nullptr || !in.backed()) return;
  if (in.dtype() == DType::BF16)
    kernels::convert_to_float(n, static_cast<const bf16*>(in.raw()) + at, out);
  else
    copy_floats(out, in.f32() + at, n);
}

// [Σ][B][Sl][w] (the order the axis gathers in) -> [B][Σ*Sl][w] (the attention layout).
void rank_major_to_batch_major(int parts, std::int64_t B, std::int64_t Sl, std::int64_t w,
                               const Tensor& in, float* out) {
  for (int r = 0; r < parts; ++r)
    for (std::int64_t b = 0; b < B; ++b)
      widen_into(float_at(out, (b * parts + r) * Sl * w), in, (r * B + b) * Sl * w, Sl * w);
}

// The other ranks' rows of a rank-major gather, batch-major: [B][(Σ-1)*Sl][w].
void remote_rows(int parts, int self, std::int64_t B, std::int64_t Sl, std::int64_t w,
                 const Tensor& in, float* out) {
  for (int r = 0, slot = 0; r < parts; ++r) {
    if (r == self) continue;
    for (std::int64_t b = 0; b < B; ++b)
      widen_into(float_at(out, (b * (parts - 1) + slot) * Sl * w), in, (r * B + b) * Sl * w,
                 Sl * w);
    ++slot;
  }
}

// The inverse for gradients: rank-major [Σ][B][Sl][w] with this rank's slot from `local`
// ([B][Sl][w]) and the others from `remote` ([B][(Σ-1)*Sl][w]): a reduce-scatter's input.
void to_rank_major(int parts, int self, std::int64_t B, std::int64_t Sl, std::int64_t w,
                   const float* local, const float* remote, float* out) {
  for (int r = 0, slot = 0; r < parts; ++r) {
    for (std::int64_t b = 0; b < B; ++b) {
      const float* src = r == self ? float_at(local, b * Sl * w)
                                    : float_at(remote, (b * (parts - 1) + slot) * Sl * w);
      copy_floats(float_at(out, (r * B + b) * Sl * w), src, Sl * w);
    }
    if (r != self) ++slot;
  }
}

// The asynchronous all-gathers of one call's K and V (rank-major staging) and, once they
// are waited, the other ranks' rows in the attention layout with their positions.
struct KvGather : KvGatherInFlight {  // k_all, v_all freed once their remote rows are copied out
  Tensor k, v;                    // [B, (Σ-1)*Sl, kvd]
  std::vector<std::int64_t> pos;  // [(Σ-1)*Sl]
  std::vector<std::int32_t> docs;  // [B, (Σ-1)*Sl] with packed documents, else empty
};

KvGather start_gather(const AttentionDims& d, const SequenceAxis& axis, const float* k,
                      const float* v, MemoryTracker& tracker) {
  KvGather g;
  static_cast<KvGatherInFlight&>(g) = cp_start_kv_gather(d, axis, k, v, tracker);
  return g;
}

// Waits the gathers; copies the complete K/V into keep_k/keep_v when asked (prefill).
void finish_gather(const AttentionDims& d, const SequenceAxis& axis, MemoryTracker& tracker,
                   KvGather& g, float* keep_k, float* keep_v) {
  const int parts = axis.comm->size(), self = axis.comm->rank();
  const std::int64_t kvd = d.kv_heads * d.head_dim;
  for (auto [h, all, sent, out, keep] :
       {std::tuple{&g.hk, &g.k_all, &g.k_sent, &g.k, keep_k},
        std::tuple{&g.hv, &g.v_all, &g.v_sent, &g.v, keep_v}}) {
    h->wait();
    *sent = Tensor();
    if (keep != nullptr) rank_major_to_batch_major(parts, d.batch, d.seq, kvd, *all, keep);
    *out = Tensor(tracker, MemCategory::CommBuffers, {d.batch, (parts - 1) * d.seq, kvd});
    remote_rows(parts, self, d.batch, d.seq, kvd, *all, out->f32());
    *all = Tensor();
  }
  const std::vector<std::int64_t>& kv = *axis.kv_pos;
  g.pos.clear();
  for (int r = 0; r < parts; ++r)
    if (r != self) g.pos.insert(g.pos.end(), kv.begin() + r * d.seq, kv.begin() + (r + 1) * d.seq);
  g.docs.clear();
  if (axis.row_docs != nullptr)
    for (std::int64_t b = 0; b < d.batch; ++b)
      for (const std::int64_t p : g.pos) g.docs.push_back(axis.row_docs[b * axis.row_seq + p]);
}

// The document ids of the rank's own queries and keys, and of the gathered keys.
kernels::AttentionDocs own_docs(const AttentionDims& d) {
  return {d.documents.ids, d.documents.ids};
}
kernels::AttentionDocs gathered_docs(const AttentionDims& d, const KvGather& g) {
  if (d.documents.ids == nullptr) return {};
  return {d.documents.ids, g.docs.data()};
}

kernels::AttentionShape shape_of(const AttentionDims& d, std::int64_t kv_len) {
  return {.batch = d.batch,
          .q_len = d.seq,
          .kv_len = kv_len,
          .heads = d.heads,
          .kv_heads = d.kv_heads,
          .head_dim = d.head_dim};
}

float scale_of(const AttentionDims& d) {
  return 1.0f / std::sqrt(static_cast<float>(d.head_dim));
}

}  // namespace

namespace {
void wait_quietly(comm::Handle& h) {
  try {
    h.wait();
  } catch (...) {  // NOLINT(bugprone-empty-catch): an error is already unwinding the caller
  }
}
}  // namespace

KvGatherInFlight::~KvGatherInFlight() {
  wait_quietly(hk);
  wait_quietly(hv);
}

KvGradsInFlight::~KvGradsInFlight() {
  wait_quietly(hk);
  wait_quietly(hv);
}

KvGatherInFlight cp_start_kv_gather(const AttentionDims& d, const SequenceAxis& axis,
                                    const float* k, const float* v, MemoryTracker& tracker) {
  const int parts = axis.comm->size();
  const std::int64_t count = d.rows() * d.kv_heads * d.head_dim;
  KvGatherInFlight g;
  g.k_all = Tensor(tracker, MemCategory::CommBuffers, d.kv, {parts * count});
  g.v_all = Tensor(tracker, MemCategory::CommBuffers, d.kv, {parts * count});
  if (d.kv == DType::F32) {
    g.hk = axis.comm->iall_gather(comm::ConstBuffer(k, count, DType::F32), g.k_all);
    g.hv = axis.comm->iall_gather(comm::ConstBuffer(v, count, DType::F32), g.v_all);
    return g;
  }
  // bf16 values already (attention_project_into): the narrowing is exact.
  for (auto [src, sent] : {std::pair{k, &g.k_sent}, std::pair{v, &g.v_sent}}) {
    *sent = Tensor(tracker, MemCategory::CommBuffers, DType::BF16, {count});
    if (sent->backed()) kernels::convert_to_bf16(count, src, static_cast<bf16*>(sent->raw()));
  }
  g.hk = axis.comm->iall_gather(g.k_sent, g.k_all);
  g.hv = axis.comm->iall_gather(g.v_sent, g.v_all);
  return g;
}

void cp_attention_forward(const AttentionDims& d, const float* n, const AttentionWeights& w,
                          const SequenceAxis& axis, const RopeTables& rope, MemoryTracker& tracker,
                          AttentionSaved& s, float* y) {
  const std::int64_t rows = d.rows(), qd = d.heads * d.head_dim;
  allocate_attention_saved(d, tracker, s);
  const AttentionSavedView view{s.q.f32(), s.k.f32(), s.v.f32(), s.out.f32(), s.lse.f32()};
  KvGatherInFlight g = cp_attention_forward_begin(d, n, w, axis, rope, tracker, view);
  cp_attention_forward_finish(d, axis, tracker, view, g);
  linear_forward(rows, qd, d.hidden, s.out.f32(), w.wo, y, /*accumulate=*/true);
}

KvGatherInFlight cp_attention_forward_begin(const AttentionDims& d, const float* n,
                                            const AttentionWeights& w, const SequenceAxis& axis,
                                            const RopeTables& rope, MemoryTracker& tracker,
                                            const AttentionSavedView& s) {
  attention_project_into(d, n, w, axis.q_pos, rope, s.q, s.k, s.v);
  if (axis.comm->size() == 1) return {};
  return cp_start_kv_gather(d, axis, s.k, s.v, tracker);
}

void cp_attention_forward_finish(const AttentionDims& d, const SequenceAxis& axis,
                                 MemoryTracker& tracker, const AttentionSavedView& s,
                                 KvGatherInFlight& gathered,
                                 const std::function<void()>& while_gathering) {
  const int parts = axis.comm->size();
  const std::int64_t rows = d.rows(), qd = d.heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  // The rank's own rows while the gathers run.
  kernels::attention_forward(shape_of(d, d.seq), s.q, s.k, s.v, axis.q_pos, axis.q_pos,
                             own_docs(d), scale_of(d), s.out, s.lse);
  if (while_gathering) while_gathering();
  if (parts == 1) {
    copy_floats(axis.keep_k, s.k, rows * kvd);
    copy_floats(axis.keep_v, s.v, rows * kvd);
    return;
  }
  KvGather g;
  static_cast<KvGatherInFlight&>(g) = std::move(gathered);
  gathered = KvGatherInFlight();
  finish_gather(d, axis, tracker, g, axis.keep_k, axis.keep_v);
  Tensor out(tracker, MemCategory::Workspace, {rows, qd});
  Tensor lse(tracker, MemCategory::Workspace, {d.batch, d.heads, d.seq});
  kernels::attention_forward(shape_of(d, (parts - 1) * d.seq), s.q, g.k.f32(), g.v.f32(),
                             axis.q_pos, g.pos.data(), gathered_docs(d, g), scale_of(d), out.f32(),
                             lse.f32());
  // Exact: the two calls saw disjoint key sets.
  kernels::attention_merge(d.batch, d.seq, d.heads, d.head_dim, s.out, s.lse, out.f32(),
                           lse.f32());
}

void cp_attention_backward(const AttentionDims& d, const float* n, const AttentionWeights& w,
                           const SequenceAxis& axis, const RopeTables& rope,
                           const AttentionSavedReadView& s, const float* dy,
                           MemoryTracker& tracker, float* dn, const AttentionGrads& g,
                           const CpBackwardPipeline& pipe) {
  const int parts = axis.comm->size(), self = axis.comm->rank();
  const std::int64_t rows = d.rows(), qd = d.heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  KvGather kv;  // the re-gather runs behind the output projection and the local rows
  if (parts > 1 && pipe.gathered != nullptr && pipe.gathered->k_all.defined())
    static_cast<KvGatherInFlight&>(kv) = std::move(*pipe.gathered);
  else if (parts > 1)
    kv = start_gather(d, axis, s.k, s.v, tracker);
  Tensor dout = attention_output_backward(d, w, s.out, dy, tracker, g);
  Tensor dq(tracker, MemCategory::Workspace, {rows, qd});
  Tensor dk(tracker, MemCategory::Workspace, {rows, kvd});  // the local keys' contributions,
  Tensor dv(tracker, MemCategory::Workspace, {rows, kvd});  // then (parts > 1) the reduced sums
  kernels::attention_backward(shape_of(d, d.seq), s.q, s.k, s.v, axis.q_pos,
                              axis.q_pos, own_docs(d), scale_of(d), s.out, s.lse, dout.f32(),
                              dq.f32(), dk.f32(), dv.f32());
  if (pipe.while_gathering) pipe.while_gathering();
  if (parts == 1) {
    dout = Tensor();
    attention_project_backward(d, n, w, axis.q_pos, rope, dq, dk, dv, dn, g);
    return;
  }
  finish_gather(d, axis, tracker, kv, nullptr, nullptr);
  // The remote keys' gradients (the merged out/lse make each key subset's backward exact).
  Tensor dk_remote(tracker, MemCategory::CommBuffers, {d.batch, (parts - 1) * d.seq, kvd});
  Tensor dv_remote(tracker, MemCategory::CommBuffers, {d.batch, (parts - 1) * d.seq, kvd});
  kernels::attention_backward(shape_of(d, (parts - 1) * d.seq), s.q, kv.k.f32(),
                              kv.v.f32(), axis.q_pos, kv.pos.data(), gathered_docs(d, kv),
                              scale_of(d), s.out,
                              s.lse, dout.f32(), dq.f32(), dk_remote.f32(), dv_remote.f32());
  kv = KvGather();
  dout = Tensor();
  // dK/dV of every key go back to the rank that owns it, summed over the ranks' queries; both
  // reduce-scatters are in flight while the query half of the projection backward runs.
  // (Both inputs are built before either is posted, so that the peak does not depend on when
  // the collective's staging is allocated: docs/tsp.md's resident set.)
  Tensor in_k(tracker, MemCategory::CommBuffers, {parts * rows * kvd});
  to_rank_major(parts, self, d.batch, d.seq, kvd, dk.f32(), dk_remote.f32(), in_k.f32());
  dk_remote = Tensor();
  Tensor in_v(tracker, MemCategory::CommBuffers, {parts * rows * kvd});
  to_rank_major(parts, self, d.batch, d.seq, kvd, dv.f32(), dv_remote.f32(), in_v.f32());
  dv_remote = Tensor();
  KvGradsInFlight grads;
  grads.hk = axis.comm->ireduce_scatter(in_k, dk);
  grads.hv = axis.comm->ireduce_scatter(in_v, dv);
  grads.in_k = std::move(in_k);
  grads.in_v = std::move(in_v);
  grads.dk = std::move(dk);
  grads.dv = std::move(dv);
  attention_project_backward_q(d, n, w, axis.q_pos, rope, dq.f32(), dn, g);
  if (pipe.deferred != nullptr)
    *pipe.deferred = std::move(grads);
  else
    cp_attention_backward_finish(d, n, w, axis, rope, grads, dn, g);
}

void cp_attention_backward_finish(const AttentionDims& d, const float* n,
                                  const AttentionWeights& w, const SequenceAxis& axis,
                                  const RopeTables& rope, KvGradsInFlight& k, float* dn,
                                  const AttentionGrads& g) {
  k.hk.wait();
  k.hv.wait();
  k.in_k = Tensor();
  k.in_v = Tensor();
  attention_project_backward_kv(d, n, w, axis.q_pos, rope, k.dk.f32(), k.dv.f32(), dn, g);
  k.dk = Tensor();
  k.dv = Tensor();
}

}  // namespace origami::parallel
