// Attention over a sequence axis (context parallel): each rank projects Q/K/V for its own
// tokens, applies RoPE at their global positions, all-gathers K and V over the axis (rank
// order, so the keys' positions are the concatenation of every rank's layout positions) and
// attends its queries to every key under the causal mask on global positions.
// Backward re-gathers K/V (they are not saved: the saved K/V stay 1/Σ of the sequence),
// computes dK/dV for all keys and reduce-scatters them to their owners.
//
//   per rank   q, out [B, Sl, Hl*d]   k, v [B, Sl, Kl*d]   gathered K/V [B, Σ*Sl, Kl*d]
//   forward    all-gather K, all-gather V          (2 * (Σ-1)/Σ * B*S*Kl*d floats received)
//   backward   all-gather K, V again; reduce-scatter dK, dV (the conjugate of the gather)
// Hl, Kl are the heads of the rank's tensor-parallel shard (all heads without TP).
#pragma once

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
};

// y[rows, h] += attention over the whole sequence.
void cp_attention_forward(const AttentionDims& dims, const float* n, const AttentionWeights& w,
                          const SequenceAxis& axis, const RopeTables& rope, MemoryTracker& tracker,
                          AttentionSaved& saved, float* y);
// The same, writing what the backward needs into caller-owned storage (TSP saves every head
// group's q, k, v, out [rows, width] and lse [batch, heads, seq] side by side).
struct AttentionSavedView {
  float *q, *k, *v, *out, *lse;
};
void cp_attention_forward_into(const AttentionDims& dims, const float* n,
                               const AttentionWeights& w, const SequenceAxis& axis,
                               const RopeTables& rope, MemoryTracker& tracker,
                               const AttentionSavedView& saved, float* y);
void cp_attention_backward(const AttentionDims& dims, const float* n, const AttentionWeights& w,
                           const SequenceAxis& axis, const RopeTables& rope,
                           const AttentionSaved& saved, const float* dy, MemoryTracker& tracker,
                           float* dn, const AttentionGrads& g);

}  // namespace origami::parallel
