// Attention over a sequence axis (context parallel): each rank projects Q/K/V for its own
// tokens, applies RoPE at their global positions, all-gathers K and V over the axis (rank
// order, so the keys' positions are the concatenation of every rank's layout positions) and
// attends its queries to every key under the causal mask on global positions.
// Backward re-gathers K/V (they are not saved: the saved K/V stay 1/Σ of the sequence),
// computes dK/dV for all keys and reduce-scatters them to their owners.
//
// Overlap (docs/design.md §3.1 (b)): the gathers are asynchronous. Forward attends the rank's own
// K/V rows while they run, then the other ranks' rows, and merges the two partial outputs
// exactly by log-sum-exp. Backward runs the output projection's backward and the local rows'
// attention backward while the re-gather runs, then the remote rows'; the dK/dV
// reduce-scatters are posted together and the query half of the projection backward (RoPE,
// dW_Q, dN += dQ W_Q) runs while they are in flight. A caller that pipelines head groups
// (TSP, §3.1 (a)) uses the split entry points below to start the next group's gathers early
// and to finish a group's K/V half later.
//
//   per rank   q, out [B, Sl, Hl*d]   k, v [B, Sl, Kl*d]   gathered K/V [B, Σ*Sl, Kl*d]
//   forward    all-gather K, all-gather V          (2 * (Σ-1)/Σ * B*S*Kl*d floats received)
//   backward   all-gather K, V again; reduce-scatter dK, dV (the conjugate of the gather)
//   resident   (R = B*Sl rows, c = R*Kl*d; CommBuffers) forward: the gathers 2Σc, each
//              replaced by its remote rows (Σ-1)c: peak (3Σ-1)c, + the remote partial out/lse
//              (Workspace); backward: the re-gather as forward, remote K/V and remote dK/dV
//              4(Σ-1)c, reduce-scatter inputs 2Σc + the algorithm's staging 2c: peak
//              max(3Σ-1, 4Σ-4, 2Σ+2)c, + the local rows' dK/dV 2c (Workspace).
// Hl, Kl are the heads of the rank's tensor-parallel shard (all heads without TP).
#pragma once

#include <functional>
#include <vector>

#include "origami/comm/communicator.h"
#include "origami/model/blocks.h"

namespace origami::parallel {

struct SequenceAxis {
  comm::Communicator* comm = nullptr;                 // the sequence-parallel group
  const std::int64_t* q_pos = nullptr;                // [Sl] this rank's positions
  const std::vector<std::int64_t>* kv_pos = nullptr;  // [Σ*Sl] every rank's, in rank order
  // Optional (prefill's KV cache): when non-null the forward copies the complete gathered K
  // and V of the call there, after RoPE, as [B, Σ*Sl, Kl*d]: each sequence's rows of every
  // rank in rank order (positions kv_pos).
  float *keep_k = nullptr, *keep_v = nullptr;
  // Packed documents (null: none): the document ids of the whole rows, [B, row_seq], from
  // which the gathered keys get theirs by position; the rank's own queries and keys carry
  // theirs (and their RoPE positions) in AttentionDims::documents.
  const std::int32_t* row_docs = nullptr;
  std::int64_t row_seq = 0;
};

// y[rows, h] += attention over the whole sequence.
void cp_attention_forward(const AttentionDims& dims, const float* n, const AttentionWeights& w,
                          const SequenceAxis& axis, const RopeTables& rope, MemoryTracker& tracker,
                          AttentionSaved& saved, float* y);
// What the forward saves for the backward, in caller-owned storage (TSP saves every head
// group's q, k, v, out [rows, width] and lse [batch, heads, seq] side by side).
struct AttentionSavedView {
  float *q, *k, *v, *out, *lse;
};
// The same, read by the backward: pointers into whatever holds them (a block's AttentionSaved,
// or one head group's slice of TSP's side-by-side tensors: nothing is copied out).
struct AttentionSavedReadView {
  const float *q, *k, *v, *out, *lse;
};
inline AttentionSavedReadView read_view(const AttentionSaved& s) {
  return {s.q.f32(), s.k.f32(), s.v.f32(), s.out.f32(), s.lse.f32()};
}
// The K/V all-gathers of one call, in flight (rank-major staging, CommBuffers). Backward's
// re-gather needs only the saved k, v, so a caller can start the next head group's before
// the current group's backward and pass it in.
struct KvGatherInFlight {
  Tensor k_all, v_all;    // [Σ][B][Sl][Kl*d], in AttentionDims::kv
  Tensor k_sent, v_sent;  // this rank's K, V in bf16 while a bf16 gather reads them
  comm::Handle hk, hv;

  KvGatherInFlight() = default;
  KvGatherInFlight(KvGatherInFlight&&) = default;
  KvGatherInFlight& operator=(KvGatherInFlight&&) = default;
  // Waits for gathers still in flight (only when an error unwinds the caller), so that the
  // transport never writes into freed staging.
  ~KvGatherInFlight();
};
KvGatherInFlight cp_start_kv_gather(const AttentionDims& dims, const SequenceAxis& axis,
                                    const float* k, const float* v, MemoryTracker& tracker);
// cp_attention_forward without its output projection, in two parts, for a caller that starts the next head group's
// gathers before it waits for this group's: begin projects q, k, v and starts the gathers;
// finish attends the local rows, runs while_gathering, waits, attends the remote rows and
// merges. The output projection is the caller's.
KvGatherInFlight cp_attention_forward_begin(const AttentionDims& dims, const float* n,
                                            const AttentionWeights& w, const SequenceAxis& axis,
                                            const RopeTables& rope, MemoryTracker& tracker,
                                            const AttentionSavedView& saved);
void cp_attention_forward_finish(const AttentionDims& dims, const SequenceAxis& axis,
                                 MemoryTracker& tracker, const AttentionSavedView& saved,
                                 KvGatherInFlight& gathered,
                                 const std::function<void()>& while_gathering = {});
// The dK/dV reduce-scatters of one call, in flight, with what the K/V half of the projection
// backward needs (the reduced dk, dv of the rank's rows).
struct KvGradsInFlight {
  Tensor in_k, in_v;  // reduce-scatter inputs [Σ*rows*Kl*d] (CommBuffers)
  Tensor dk, dv;      // [rows, Kl*d], the outputs (Workspace)
  comm::Handle hk, hv;

  KvGradsInFlight() = default;
  KvGradsInFlight(KvGradsInFlight&&) = default;
  KvGradsInFlight& operator=(KvGradsInFlight&&) = default;
  ~KvGradsInFlight();  // as ~KvGatherInFlight
};
// Pipelining options of the backward (all optional):
//   gathered: this call's K/V re-gather, already started by cp_start_kv_gather on saved.k,
//             saved.v (otherwise the call starts it);
//   deferred: return with the dK/dV reduce-scatters still in flight, in *deferred; the caller
//             finishes with cp_attention_backward_finish (otherwise the call waits for them
//             after the query half of the projection backward);
//   while_gathering: run after the local rows' attention backward, before the remote rows'.
struct CpBackwardPipeline {
  KvGatherInFlight* gathered = nullptr;
  KvGradsInFlight* deferred = nullptr;
  std::function<void()> while_gathering;
};
void cp_attention_backward(const AttentionDims& dims, const float* n, const AttentionWeights& w,
                           const SequenceAxis& axis, const RopeTables& rope,
                           const AttentionSavedReadView& saved, const float* dy,
                           MemoryTracker& tracker, float* dn, const AttentionGrads& g,
                           const CpBackwardPipeline& pipeline = {});
// Waits a deferred call's reduce-scatters and runs the K/V half of its projection backward
// (uses w.wk, w.wv and g.wk, g.wv only).
void cp_attention_backward_finish(const AttentionDims& dims, const float* n,
                                  const AttentionWeights& w, const SequenceAxis& axis,
                                  const RopeTables& rope, KvGradsInFlight& deferred, float* dn,
                                  const AttentionGrads& g);

}  // namespace origami::parallel
