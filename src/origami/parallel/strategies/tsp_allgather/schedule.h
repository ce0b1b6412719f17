// TSP's allgather schedule (Megatron-Core's Generalized Tensor Parallelism, GTP, on TSP's
// layout): every rank holds 1/D of every weight and 1/D of the tokens, as under TSP's
// broadcast-ring schedule (parallel/tsp_ops.h), but a block reaches the weights it does not
// hold by ALL-GATHERING its whole weight just before its GEMMs (the next block's gather
// prefetched while this one computes) and REDUCE-SCATTERING its weight gradient on the way
// back: ZeRO-3 on the model-parallel axis. This header states the schedule once: the per-rank
// shapes, the conjugate communication pairs, the bytes and the resident set. The engine
// (allgather_ops.h) sizes its buffers from it, and the planner (plan/cost_model.cpp,
// plan/buffers.cpp) calls it for the allgather rows; docs/tsp.md points here.
//
// Per rank (R = B*S/D rows; D ranks; floats):
//   A = 2(qd + kvd)·h  one rank's packed attention shard P_r = [W_Q,r; W_K,r; W_V,r rows | W_O,r
//                      columns] (TSP's packing: qd = H/D·d, kvd = kv heads per rank · d)
//   M = 3(f/D)·h       one rank's packed MLP shard M_r = [gate_r; up_r rows | down_r columns]
//   c = R·kvd          one rank's K (or V) rows of one head group
//
// Conjugate pairs, per layer (forward <-> backward; the backward re-gathers, nothing is saved):
//   block      forward                                backward
//   attention  all-gather [P_0..P_{D-1}] (tsp-shards)  all-gather again; reduce-scatter
//                                                      [dP_0..dP_{D-1}] -> dP_r (tsp-grads)
//              per head group j: all-gather K_j, V_j   all-gather K_j, V_j again;
//              (the tsp axis, rank order)              reduce-scatter dK_j, dV_j
//   MLP        all-gather [M_0..M_{D-1}] (tsp-shards)  all-gather again; reduce-scatter
//                                                      [dM_0..dM_{D-1}] -> dM_r (tsp-grads)
//   embedding, LM head, RMSNorm: TSP's (the all-to-all lookup; the chunked vocabulary ring:
//              a gathered vocabulary block would be V·h floats per rank).
// With the gathered weights every rank runs all D head groups and all D MLP column blocks on
// its own rows; the MLP then needs no activation traffic at all.
//
// Prefetch (one block ahead, as the driver states the order: ForwardStep): attention l's
// forward starts MLP l's gather; MLP l's forward starts attention l+1's (or, inside a full
// recompute, MLP l's again for its backward); MLP l's backward starts attention l's; attention
// l's backward starts MLP l-1's (attention l-1's when the backward recomputes). The first
// block after the LM head gathers on demand. A block's reduce-scatter is waited at the end of
// the next block (or before the embedding's backward), so it runs behind that block.
#pragma once

#include <algorithm>
#include <cstdint>

#include <vector>

#include "origami/model/config.h"
#include "origami/parallel/layout.h"
#include "origami/parallel/strategies/tsp/schedule.h"  // TspOverlap: the overlap's terms

namespace origami::parallel::tsp_allgather {

// The per-rank sizes above, in floats.
struct Shapes {
  int degree = 1;                   // D
  std::int64_t rows = 0;            // R = B*S/D
  std::int64_t hidden = 0;          // h
  std::int64_t group_heads = 0;     // H/D query heads per head group
  std::int64_t group_kv_heads = 0;  // kv heads per head group (1 when replicated)
  std::int64_t head_dim = 0;
  std::int64_t group_ffn = 0;  // f/D MLP columns per block
  std::int64_t attention = 0;  // A
  std::int64_t mlp = 0;        // M
  std::int64_t kv = 0;         // c
};

// From one head group's and one MLP column block's sizes (the planner's per-rank shapes).
inline Shapes make_shapes(int degree, std::int64_t rows, std::int64_t hidden,
                          std::int64_t group_heads, std::int64_t group_kv_heads,
                          std::int64_t head_dim, std::int64_t group_ffn) {
  Shapes s;
  s.degree = degree;
  s.rows = rows;
  s.hidden = hidden;
  s.group_heads = group_heads;
  s.group_kv_heads = group_kv_heads;
  s.head_dim = head_dim;
  s.group_ffn = group_ffn;
  s.attention = 2 * (group_heads + group_kv_heads) * head_dim * hidden;
  s.mlp = 3 * group_ffn * hidden;
  s.kv = rows * group_kv_heads * head_dim;
  return s;
}

// From the model: R = B*S/D rows of a micro-batch of B sequences of S tokens.
inline Shapes shapes(const ModelConfig& m, int degree, std::int64_t micro_batch, std::int64_t seq) {
  return make_shapes(degree, micro_batch * seq / degree, m.hidden_size,
                     m.num_attention_heads / degree, kv_heads_per_rank(m, degree), m.head_dim(),
                     m.intermediate_size / degree);
}

// ---- bytes: floats each rank SENDS per layer (ring all-gather and reduce-scatter of equal
// blocks b: (D-1)·b per rank, docs/comm.md).

// The whole-weight all-gathers of one pass (attention + MLP), on tsp-shards.
inline std::int64_t weight_gather_floats(const Shapes& s) {
  return (s.degree - 1) * (s.attention + s.mlp);
}
// The weight-gradient reduce-scatters of one backward (attention + MLP), on tsp-grads.
inline std::int64_t weight_reduce_scatter_floats(const Shapes& s) {
  return (s.degree - 1) * (s.attention + s.mlp);
}
// The K/V all-gathers of one pass (2D calls), and the dK/dV reduce-scatters of a backward
// (2D calls), on the tsp axis.
inline std::int64_t kv_gather_floats(const Shapes& s) {
  return 2 * s.degree * (s.degree - 1) * s.kv;
}
inline std::int64_t kv_reduce_scatter_floats(const Shapes& s) {
  return kv_gather_floats(s);
}
// Calls per layer and pass: one weight all-gather per block; 2D K/V gathers.
inline std::int64_t weight_gather_calls() {
  return 2;
}
inline std::int64_t kv_gather_calls(const Shapes& s) {
  return 2 * s.degree;
}

inline std::int64_t forward_floats(const Shapes& s) {
  return weight_gather_floats(s) + kv_gather_floats(s);
}
inline std::int64_t backward_floats(const Shapes& s) {
  return weight_gather_floats(s) + weight_reduce_scatter_floats(s) + kv_gather_floats(s) +
         kv_reduce_scatter_floats(s);
}

// ---- resident set (CommBuffers floats, per rank, D >= 2; docs/tsp.md "allgather").

// The ring reduce-scatter's staging for blocks of b floats: two slots of min(1 MiB, b).
inline std::int64_t reduce_scatter_staging(std::int64_t block_floats) {
  return 2 * std::min<std::int64_t>((std::int64_t{1} << 20) / 4, block_floats);
}
// One block's gradient reduce-scatter while in flight: input D·b, output b, staging.
inline std::int64_t reduce_scatter_in_flight(const Shapes& s, std::int64_t block_floats) {
  return s.degree * block_floats + block_floats + reduce_scatter_staging(block_floats);
}
// K/V buffers of one head group (attention_cp.h): forward (3D-1)c; backward
// max(3D-1, 4D-4, 2D+2)c.
inline std::int64_t kv_forward_peak(const Shapes& s) {
  return (3 * s.degree - 1) * s.kv;
}
inline std::int64_t kv_backward_peak(const Shapes& s) {
  const std::int64_t D = s.degree;
  return std::max({3 * D - 1, 4 * D - 4, 2 * D + 2}) * s.kv;
}

// The largest phase of a training step's attention and MLP blocks (the head's and the
// embedding's are TSP's): the whole weight being used, the next block's in flight, the
// gradient being formed and the previous block's reduce-scatter still in flight:
//   attention forward   D·A + D·M (next) + (3D-1)c
//   MLP forward         D·M + D·A (the next attention; 2D·M inside a full recompute: MLP l's
//                       weights again, for its backward)
//   MLP backward        D·M + D·A (next) + D·M (dM) + in-flight(A) of attention l+1 (none
//                       under full recompute: the recomputed forward between waited it)
//   attention backward  D·A + D·M or, recomputing, D·A (next) + D·A (dP) + in-flight(M) of
//                       MLP l + max(3D-1, 4D-4, 2D+2)c
//   recomputed attention forward: its forward phase + in-flight(A) of attention l+1
// A forward alone holds at most the forward rows. With one layer there is no attention l+1
// whose reduce-scatter could be in flight and, under a full recompute, no next attention
// gathered during the attention backward (layer 0's has none; with more layers another
// layer's backward holds it).
inline std::int64_t forward_peak(const Shapes& s) {
  const std::int64_t D = s.degree, A = s.attention, M = s.mlp;
  return std::max(D * A + D * M + kv_forward_peak(s), D * M + D * A);
}
inline std::int64_t backward_peak(const Shapes& s, bool recompute_full, std::int64_t layers) {
  const std::int64_t D = s.degree, A = s.attention, M = s.mlp;
  const bool above = layers > 1;  // a layer l+1 exists for some layer l
  const std::int64_t attention_above = above ? reduce_scatter_in_flight(s, A) : 0;
  const std::int64_t mlp_bwd = 2 * D * M + D * A + (recompute_full ? 0 : attention_above);
  const std::int64_t attn_bwd = 2 * D * A + (recompute_full ? (above ? D * A : 0) : D * M) +
                                reduce_scatter_in_flight(s, M) + kv_backward_peak(s);
  const std::int64_t recomputed =
      recompute_full
          ? std::max(D * A + D * M + kv_forward_peak(s) + attention_above, 2 * D * M)
          : 0;
  return std::max({forward_peak(s), mlp_bwd, attn_bwd, recomputed});
}

// ---- time: what each message hides behind (the prefetch above), as tsp/schedule.h's
// tsp_overlap states TSP's; the planner prices it (plan/predict.cpp). `layers` L, the LM head's
// vocabulary block of `vocab_block_bytes`; D = 1: empty.
std::vector<TspOverlap> overlap(const Shapes& s, std::int64_t layers,
                                std::int64_t vocab_block_bytes, bool full_recompute,
                                const TspComputeSeconds& c);

}  // namespace origami::parallel::tsp_allgather
