// TSP's schedule, stated once: the per-rank shapes, the conjugate communication pairs of each
// block (forward <-> backward), the bytes every rank sends per block, the resident
// communication buffers per phase and what compute each message hides behind (tsp_overlap).
// The engine (tsp_*.cpp) sizes its shard buffers with these functions; the planner
// (plan/cost_model.cpp, plan/buffers.cpp, plan/predict.cpp) calls them for TSP rows and
// docs/tsp.md explains them; exact tests (tests/parallel/tsp_comm_test.cpp,
// tests/plan/cost_model_test.cpp) hold the engine to them. A change to TSP's schedule (a
// prefetch moved, a buffer added) is an edit in this folder, the planner follows.
//
// Per rank: R = B·S/D token rows, one head group of H/D heads (qd = H/D·d, kvd = Kv/D·d, or d
// when D > Kv), f/D MLP columns, Vr = Vp/D vocabulary rows (Vp: V padded to a multiple of D).
// The blocks (the code: tsp_ops.cpp embedding, tsp_attention.cpp, tsp_mlp.cpp, tsp_head.cpp):
//   embedding  rows of the table owned by rank r; ids and rows by all-to-all
//   attention  packed P_j = [W_Q,j | W_K,j | W_V,j rows | W_O,j columns] broadcast by its owner j,
//              head groups pipelined around their K/V all-gathers (attention_cp.h)
//   MLP        packed M_j = [gate_j | up_j rows | down_j columns] on a ring rank -> rank-1;
//              backward: weights and accumulator as separate hops (GradRing)
//   LM head    vocabulary blocks on the same ring, in chunks of at most kHeadRingChunkFloats
//   RMSNorm    replicated; gradients summed over the axis
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "origami/parallel/schedule_message.h"

namespace origami::parallel {

// The largest LM-head ring message (floats): the vocabulary ring moves each block in chunks of
// at most this many, so the head's buffers do not grow with V·h/D (tsp_head.cpp).
inline constexpr std::int64_t kHeadRingChunkFloats = std::int64_t{1} << 20;

// Vocabulary rows per LM-head ring message: a full chunk's rows for width h, at least one and
// at most the rank's vocabulary block.
inline std::int64_t tsp_head_chunk_rows(std::int64_t h, std::int64_t vocab_rows) {
  return std::clamp<std::int64_t>(kHeadRingChunkFloats / h, 1, vocab_rows);
}

// What one rank of a TSP axis of degree D works on.
struct TspRankShapes {
  int D = 1;
  std::int64_t L = 0, h = 0;    // layers, hidden width
  std::int64_t rows = 0;        // R: the rank's token rows of a micro-batch
  std::int64_t heads = 0;       // H/D: one head group
  std::int64_t qd = 0, kvd = 0;  // one head group's query and key/value widths
  std::int64_t ffn = 0;         // f/D
  std::int64_t vocab_rows = 0;  // Vr = Vp/D
};

// The packed shards that travel, in floats: P_j (attention) and M_j (MLP).
inline std::int64_t tsp_attention_shard_floats(const TspRankShapes& s) {
  return 2 * (s.qd + s.kvd) * s.h;
}
inline std::int64_t tsp_mlp_shard_floats(const TspRankShapes& s) { return 3 * s.ffn * s.h; }

// Mixture of experts (docs/moe.md), per rank, layer and micro-batch, in bytes of `elem`-byte
// floats (the balance's all-reduce of 2E doubles per forward aside, the same in both).
// Ring (tsp_moe.cpp): M_E, the shard of every expert, rides the MLP's ring on tsp_shards:
// forward D-1 hops, backward 2D-1 (weights D-1, accumulators D); the routing does not matter.
inline std::int64_t tsp_moe_ring_shard_floats(const TspRankShapes& s, std::int64_t experts) {
  return experts * tsp_mlp_shard_floats(s);
}
inline std::int64_t tsp_moe_ring_forward_bytes(const TspRankShapes& s, std::int64_t experts,
                                               std::int64_t elem) {
  return (s.D - 1) * tsp_moe_ring_shard_floats(s, experts) * elem;
}
inline std::int64_t tsp_moe_ring_backward_bytes(const TspRankShapes& s, std::int64_t experts,
                                                std::int64_t elem) {
  return (2 * s.D - 1) * tsp_moe_ring_shard_floats(s, experts) * elem;
}

// Expert schedule (tsp_moe_expert.cpp): rank r owns experts [r·E/D, (r+1)·E/D) whole.
inline int tsp_expert_owner(std::int64_t experts, int D, std::int64_t expert) {
  return static_cast<int>(expert / (experts / D));
}
// The routing's part: of this rank's kept (token, expert) assignments, `sent` go to experts of
// other ranks; `received` of the other ranks' assignments come to this rank's experts.
struct TspExpertRows {
  std::int64_t sent = 0, received = 0;
};
// On the tsp axis, by all-to-all: forward, E/D int64 counts to each other rank, the sent rows
// [sent, h] and the outputs back [received, h]; backward, [dy | routing weight] rows
// [sent, h+1] to the owners and [dx | d routing weight] rows [received, h+1] back, and, when
// the forward kept nothing (recompute mlp), the rows [sent, h] once more (the counts are the
// forward's). Recompute full re-runs the forward (its bytes again).
inline std::int64_t tsp_moe_expert_forward_bytes(const TspRankShapes& s, std::int64_t experts,
                                                 const TspExpertRows& rows, std::int64_t elem) {
  return (s.D - 1) * (experts / s.D) * 8 + (rows.sent + rows.received) * s.h * elem;
}
inline std::int64_t tsp_moe_expert_backward_bytes(const TspRankShapes& s,
                                                  const TspExpertRows& rows, std::int64_t elem,
                                                  bool forward_saved) {
  return (rows.sent + rows.received) * (s.h + 1) * elem +
         (forward_saved ? 0 : rows.sent * s.h * elem);
}
// all-to-all calls per layer: forward 3 (counts, rows, outputs), backward 2 (+1 unsaved).
inline constexpr int kTspExpertForwardCalls = 3;
inline std::int64_t tsp_moe_expert_backward_calls(bool forward_saved) {
  return forward_saved ? 2 : 3;
}

// The LM-head ring's chunk rows Vc and the chunks per vocabulary block k = ceil(Vr / Vc).
inline std::int64_t tsp_head_chunk_rows(const TspRankShapes& s) {
  return tsp_head_chunk_rows(s.h, s.vocab_rows);
}
inline std::int64_t tsp_head_chunks(const TspRankShapes& s) {
  const std::int64_t c = tsp_head_chunk_rows(s);
  return (s.vocab_rows + c - 1) / c;
}

// The buffers an attention call rotates the shards P_j through (tsp_attention.cpp): the call
// starts P_0 .. P_{kTspShardBuffers-1}, and P_j is broadcast into the buffer group
// j - kTspShardBuffers has just used, that many groups ahead of its own.
inline constexpr int kTspShardBuffers = 2;

// How many of the next attention call's shards (P_0, P_1, ...) are broadcast ahead, behind
// the MLP (and head) that precede it; the others are broadcast when the call starts.
inline constexpr int kTspPrefetchedShards = 2;
static_assert(kTspPrefetchedShards >= 0 && kTspPrefetchedShards <= kTspShardBuffers,
              "the next call's shards are prefetched into the shard buffers");

// K and V: the collectives one head group issues per direction (all-gathers, reduce-scatters).
inline constexpr int kTspKvCallsPerGroup = 2;

// The communicators of a TSP axis (TspOps): the axis itself, its duplicate for the shard
// broadcasts and ring hops (TspOps::shard_comm) and the second one for the dP_j reduces
// (TspOps::grad_comm), named as the communication profile names them.
inline constexpr const char* kTspAxis = "tsp";
inline constexpr const char* kTspShards = "tsp_shards";
inline constexpr const char* kTspGrads = "tsp_grads";

using TspTraffic = ScheduleMessage;  // one kind of message (parallel/schedule_message.h)

// Every message of one micro-batch's forward and backward, in the order the planner lists
// them, for `elem`-byte elements; full_recompute re-runs each layer's forward (its messages
// included) in backward. D = 1 moves nothing: the list is empty.
std::vector<TspTraffic> tsp_traffic(const TspRankShapes& s, std::int64_t elem,
                                    bool full_recompute);

// Each block's forward message and its conjugate in backward (the transpose that carries the
// gradient back the same way), as (comm, op) of tsp_traffic.
using TspConjugatePair = ConjugatePair;  // parallel/schedule_message.h
inline constexpr TspConjugatePair kTspConjugatePairs[] = {
    // ids and rows to the owners <-> the rows' gradients back to the owners
    {"tsp", "embedding", kTspAxis, "all_to_all", kTspAxis, "all_to_all"},
    // P_j broadcast by its owner <-> dP_j reduced to its owner
    {"tsp", "attention", kTspShards, "broadcast", kTspGrads, "reduce"},
    // K/V all-gathered <-> dK/dV reduce-scattered
    {"tsp", "attention", kTspAxis, "all_gather", kTspAxis, "reduce_scatter"},
    // M_s hops rank -> rank-1 <-> dM_s hops the same way behind it (GradRing)
    {"tsp", "mlp", kTspShards, "send", kTspShards, "send"},
    // vocabulary chunks hop <-> their gradients hop behind them (GradRing)
    {"tsp", "head", kTspShards, "send", kTspShards, "send"},
};

// The buffers TSP shares with the other strategies, whose sizes their own models state (in
// bytes): one head group's context-parallel attention (attention_cp.cpp; plan::cp_attention)
// and the dP_j chain reduce's staging (comm/collectives/reduce.cpp; plan::reduce_staging).
struct TspSharedBuffers {
  std::int64_t group_forward = 0, group_backward = 0;
  std::int64_t dp_reduce_staging = 0;
};

// TSP's resident communication buffers per phase, in bytes (docs/tsp.md, "Resident set per
// phase"), the collectives' staging included. attention_backward includes the dP_j reduce's
// staging (reduce_staging), whose overlap with the rest is timing dependent: it is the upper
// bound, attention_backward - reduce_staging the lower one (docs/planner.md).
struct TspResident {
  std::int64_t attention_forward = 0, attention_backward = 0, mlp_forward = 0,
               mlp_backward = 0, head_forward = 0, head_backward = 0, embedding = 0;
  std::int64_t reduce_staging = 0;  // part of attention_backward, timing dependent
  std::int64_t peak_bytes() const;
};
TspResident tsp_resident_set(const TspRankShapes& s, bool full_recompute, std::int64_t elem,
                             const TspSharedBuffers& shared);

// The compute one device runs per layer pass (seconds), which the planner estimates: a whole
// attention (its D head groups), an MLP, the LM head, forward and backward; the attention's
// causal products (core) and one h x (H·d) projection's backward, which the allgather
// schedule's K/V collectives hide behind.
struct TspComputeSeconds {
  double attention_f = 0, attention_b = 0, mlp_f = 0, mlp_b = 0, head_f = 0, head_b = 0;
  double core_f = 0, core_b = 0, projection_b = 0;
};

// One position of a message kind in TSP's overlapped schedule: `count` times per micro-batch,
// `messages` messages in flight together are waited for after `window` seconds of compute (0:
// waited at once). A message is one call of its kind, or, when hop_bytes > 0, one ring hop
// of that many bytes (the ring's sends carry both the MLP's and the head's hops); a fraction
// of a call is that share of its bytes (the allgather schedule's attention and MLP weights
// share one row).
struct TspOverlapPosition {
  double count = 0;
  double messages = 1;
  std::int64_t hop_bytes = 0;
  double window = 0;
};
// Every position of one kind (comm, op of tsp_traffic); a kind with no entry is waited at
// once (the embedding's all-to-alls), one with no positions costs nothing (a receive: the
// peer's send carries the time).
struct TspOverlap {
  const char* comm;
  const char* op;
  std::vector<TspOverlapPosition> positions;
};
// TSP's overlap schedule (docs/tsp.md), what hides behind what for one micro-batch: the
// planner prices each message with its link model and exposes max(0, time - window) per
// position (plan/predict.cpp). The positions of a kind partition its calls. D = 1: empty.
std::vector<TspOverlap> tsp_overlap(const TspRankShapes& s, std::int64_t elem,
                                    bool full_recompute, const TspComputeSeconds& c);
// The LM head's vocabulary ring (both TSP schedules run it): D-1 forward hops of the
// `block_bytes` vocabulary block, each behind one block's logits, and the backward GradRing.
void add_tsp_head_ring(std::vector<TspOverlapPosition>& out, int D, std::int64_t block_bytes,
                       double head_f, double head_b);

// TSP's own Workspace (elements) beyond the shared blocks' (the driver's stream rows, the
// context-parallel attention's scratch): W_O of two head groups kept aside in forward (the
// output projection deferred into the next group's gather window); in backward the previous
// group's reduced dK/dV and its W_K, W_V kept aside; the MLP backward's gate/up (read in
// their saved slot, or recomputed when not saved) and dgated, da, du of one shard.
struct TspWorkspace {
  std::int64_t attention_forward = 0, attention_backward = 0, mlp_backward = 0;
};
TspWorkspace tsp_workspace(const TspRankShapes& s, bool mlp_saved);

}  // namespace origami::parallel
