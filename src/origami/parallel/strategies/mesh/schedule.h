// The baselines' schedule (TP, TP-SP, SP/CP, TP x SP; DP adds nothing inside a micro-batch),
// stated once: the per-rank shapes, the conjugate communication pairs of each block (forward
// <-> backward), every message of a micro-batch with the bytes this rank sends, and the
// resident communication buffers per phase. The blocks (mesh_ops.cpp) issue exactly these and
// size their buffers with them; the planner (plan/cost_model.cpp, plan/buffers.cpp) calls them
// for the baselines' rows; exact tests (tests/parallel/comm_bytes_test.cpp, MeshSchedule.*;
// tests/plan/cost_model_test.cpp) hold the engine to them. The table of shapes per tensor is in
// mesh_ops.h.
//
// Per rank: R rows (the rank's sequence shard of its replica's micro-batch), the residual stream
// [R, h], or [R/T, h] with sequence-parallel regions (TP-SP); Kv/T·d key/value columns (one
// whole kv head when T > Kv).
//   entry  identity, or all-gather tp of the stream (TP-SP) <-> all-reduce / reduce-scatter tp
//   exit   all-reduce tp, or reduce-scatter tp (TP-SP)      <-> identity / all-gather tp
//   K/V    all-gather sp (cp_attention_forward)             <-> re-gather, reduce-scatter sp
//   head   (max, sum-exp) pairs all-gathered, target logit all-reduced over tp (forward only)
// The step's gradient reductions (sp, dp, tp-kv, TP-SP's norms) are assign_reduction_axes'
// (registry.h) and plan::comm_gradient_reduction's, not a micro-batch's.
#pragma once

#include <cstdint>
#include <vector>

#include "origami/parallel/schedule_message.h"

namespace origami::parallel {

// TP-SP: the residual stream is split over the tensor axis between blocks (TP keeps it whole).
constexpr bool mesh_splits_stream(bool seqpar, int T) { return seqpar && T > 1; }

// What one rank of a T x Σ mesh works on.
struct MeshRankShapes {
  int T = 1, S = 1;      // tensor and sequence degrees
  bool seqpar = false;   // TP-SP regions (meaningful at T > 1)
  std::int64_t L = 0, h = 0;
  std::int64_t rows = 0;  // R: the rank's sequence shard (B·S/Σ rows of its replica)
  std::int64_t kvd = 0;   // the rank's key/value width (kv heads per rank · d)
  bool split_stream() const { return mesh_splits_stream(seqpar, T); }
  std::int64_t stream_rows() const { return split_stream() ? rows / T : rows; }
};

// The baselines' communicators, named as ParallelGroups and the communication profile name them.
inline constexpr const char* kMeshTensorAxis = "tp";
inline constexpr const char* kMeshSequenceAxis = "sp";

using MeshTraffic = ScheduleMessage;  // one kind of message (parallel/schedule_message.h)

// Every message of one micro-batch's forward and backward on rank `tp_rank` of the tensor axis
// (an all-reduce's bytes depend on the rank when its blocks are unequal), for `elem`-byte
// elements, in the order the planner lists them; full_recompute re-runs each layer's forward
// (its messages included) in backward. T = Σ = 1 moves nothing: the list is empty.
std::vector<MeshTraffic> mesh_traffic(const MeshRankShapes& s, std::int64_t elem,
                                      bool full_recompute, int tp_rank);

// Each block's forward message and its conjugate in backward, as (comm, op) of mesh_traffic
// (parallel/schedule_message.h); under T x Σ both the tensor layout's pairs and SP's hold.
using MeshConjugatePair = ConjugatePair;
inline constexpr MeshConjugatePair kMeshConjugatePairs[] = {
    // TP: an exit's partial sums all-reduced <-> dY already whole (identity); an entry's
    // whole input (identity) <-> dN's partial sums all-reduced.
    {"tp", "embedding", kMeshTensorAxis, "all_reduce", nullptr, nullptr},
    {"tp", "attention", nullptr, nullptr, kMeshTensorAxis, "all_reduce"},
    {"tp", "attention", kMeshTensorAxis, "all_reduce", nullptr, nullptr},
    {"tp", "mlp", nullptr, nullptr, kMeshTensorAxis, "all_reduce"},
    {"tp", "mlp", kMeshTensorAxis, "all_reduce", nullptr, nullptr},
    {"tp", "head", nullptr, nullptr, kMeshTensorAxis, "all_reduce"},
    // TP-SP: an exit reduce-scattered <-> dY all-gathered; an entry all-gathered <-> dN
    // reduce-scattered (backward also re-gathers the block input, to recompute nothing).
    {"tpsp", "embedding", kMeshTensorAxis, "reduce_scatter", kMeshTensorAxis, "all_gather"},
    {"tpsp", "attention", kMeshTensorAxis, "all_gather", kMeshTensorAxis, "reduce_scatter"},
    {"tpsp", "attention", kMeshTensorAxis, "reduce_scatter", kMeshTensorAxis, "all_gather"},
    {"tpsp", "mlp", kMeshTensorAxis, "all_gather", kMeshTensorAxis, "reduce_scatter"},
    {"tpsp", "mlp", kMeshTensorAxis, "reduce_scatter", kMeshTensorAxis, "all_gather"},
    {"tpsp", "head", kMeshTensorAxis, "all_gather", kMeshTensorAxis, "reduce_scatter"},
    // TP and TP-SP: the head's (max, sum-exp) pairs all-gathered and target logit all-reduced
    // have no conjugate: backward reads the combined log-sum-exp the forward kept.
    {"tp", "head", kMeshTensorAxis, "all_gather", nullptr, nullptr},
    {"tp", "head", kMeshTensorAxis, "all_reduce", nullptr, nullptr},
    {"tpsp", "head", kMeshTensorAxis, "all_gather", nullptr, nullptr},
    {"tpsp", "head", kMeshTensorAxis, "all_reduce", nullptr, nullptr},
    // SP: K/V all-gathered <-> dK/dV reduce-scattered (and K/V re-gathered in backward).
    {"sp", "attention", kMeshSequenceAxis, "all_gather", kMeshSequenceAxis, "reduce_scatter"},
};

// The buffers the baselines share with other strategies or take from the collectives, whose
// sizes their own models state (in bytes): SP's context-parallel attention (attention_cp.cpp;
// plan::cp_attention; 0 at Σ = 1), the staging of a block exit's collective (TP-SP's
// reduce-scatter of the stream block, TP's all-reduce of the [R, h] partial) and of the head's
// target-logit all-reduce (comm/collectives; plan::*_staging).
struct MeshSharedBuffers {
  std::int64_t cp_forward = 0, cp_backward = 0;
  std::int64_t exit_staging = 0, target_staging = 0;
};

// The baselines' resident communication buffers (CommBuffers) per phase, in bytes, as
// mesh_ops.cpp allocates them: TP-SP gathers a block's input rows [R, h] (mesh_gathered_rows)
// and reduce-scatters its exit into [R/T, h]; TP all-reduces its partial in place (the
// partial itself is Workspace); the head gathers the (max, sum-exp) pairs of every tp rank
// (mesh_head_stats_floats). The embedding's phases are the MLP forward's.
struct MeshResident {
  std::int64_t attention_forward = 0, attention_backward = 0, mlp_forward = 0,
               mlp_backward = 0, head_forward = 0, head_backward = 0;
  std::int64_t peak_bytes() const;
};
MeshResident mesh_resident_set(const MeshRankShapes& s, std::int64_t elem,
                               const MeshSharedBuffers& shared);

// Floats of a TP-SP block's gathered input rows (0 without sequence-parallel regions), and of
// the head's gathered (max, sum-exp) pairs of every tp rank.
inline std::int64_t mesh_gathered_rows_floats(const MeshRankShapes& s) {
  return s.split_stream() ? s.rows * s.h : 0;
}
inline std::int64_t mesh_head_stats_floats(const MeshRankShapes& s) {
  return s.T > 1 ? std::int64_t{s.T} * 2 * s.rows : 0;
}

}  // namespace origami::parallel
