// Communication-buffer and workspace peaks, phase by phase (docs/planner.md). Each phase lists
// what is alive at its peak, as the engine allocates it:
//   model/driver.cpp      x, n, dx, dn [Rs, h]; rstd [Rs] as workspace when not saved; the
//                         layer input's clone under full recompute
//   model/blocks.cpp      MLP gated / dgated / da / du [Rb, f/T], recomputed gate/up (mlp
//                         policy); attention dout, dq [Rb, qd], dk, dv [Rb, kvd]; RoPE tables
//   parallel/mesh_ops.cpp TP partial outputs [Rb, h] (workspace), head stats [3, Rb] + lse
//   parallel/strategies/mesh/schedule.h  the baselines' resident set (TP-SP gathered rows,
//                         reduce-scatter targets, the head's gathered pairs)
//   parallel/attention_cp.cpp  SP and each TSP head group (cp_attention): gathered K/V
//                         replaced by their remote rows, remote dK/dV, reduce-scatter inputs;
//                         the remote rows' partial output and lse (workspace)
//   parallel/strategies/tsp/schedule.h  TSP's resident set and its own Workspace
//   comm/collectives      staging of all-reduce, reduce-scatter and reduce
#include "origami/plan/buffers.h"

#include <algorithm>
#include <initializer_list>

#include "origami/comm/collectives/algorithms.h"
#include "origami/parallel/strategies/mesh/schedule.h"
#include "origami/parallel/strategies/tsp_allgather/schedule.h"

namespace origami::plan {

namespace {
using comm::detail::kPipelineChunkBytes;  // the collectives' own chunk sizes
using comm::detail::kReduceChunkBytes;
constexpr std::int64_t kReduceSlots = 4;                // comm/collectives/reduce.cpp

std::int64_t max_of(std::initializer_list<std::int64_t> v) { return std::max(v); }
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
// The collectives chunk the fp32 buffers the engine moves (4-byte elements); a precision
// profile accounts each element at `elem` bytes, so a chunk holds `limit / 4` elements
// whatever the profile (the dry run's bf16 staging is half of fp32's).
std::int64_t chunk_bytes(std::int64_t limit, std::int64_t elem) { return limit / 4 * elem; }
}  // namespace

std::int64_t all_reduce_staging(std::int64_t count, int n, std::int64_t elem) {
  if (n <= 1 || count <= 0) return 0;
  return 2 * std::min(chunk_bytes(kReduceChunkBytes, elem), ceil_div(count, n) * elem);
}

std::int64_t reduce_scatter_staging(std::int64_t block, int n, std::int64_t elem) {
  if (n <= 1 || block <= 0) return 0;
  return 2 * std::min(chunk_bytes(kReduceChunkBytes, elem), block * elem);
}

std::int64_t reduce_staging(std::int64_t count, int n, std::int64_t elem) {
  if (n <= 1 || count <= 0) return 0;
  const std::int64_t bytes = count * elem;
  const std::int64_t chunk = chunk_bytes(kPipelineChunkBytes, elem);
  return std::min(kReduceSlots, ceil_div(bytes, chunk)) * std::min(chunk, bytes);
}

CpAttention cp_attention(int parts, std::int64_t rows, std::int64_t qd, std::int64_t kvd,
                         std::int64_t heads, std::int64_t e) {
  CpAttention cp;
  if (parts <= 1) return cp;
  const std::int64_t P = parts, c = rows * kvd * e;  // one rank's K (or V) rows, in bytes
  cp.forward_comm = (3 * P - 1) * c;  // the gathers 2Pc; K's replaced by its remote rows
  cp.backward_comm = max_of({(3 * P - 1) * c,  // the re-gather, as forward
                             4 * (P - 1) * c,  // remote K/V and remote dK/dV
                             2 * P * c + reduce_scatter_staging(rows * kvd, parts, e)});
  cp.forward_workspace = rows * (qd + heads);      // remote rows' partial output and lse
  cp.backward_workspace = rows * (2 * qd + 2 * kvd);  // dout, dq, dk, dv
  return cp;
}

TspResident tsp_resident_set(const Shapes& s, Recompute recompute, std::int64_t e) {
  const parallel::TspRankShapes t = s.tsp_rank();
  const CpAttention group = cp_attention(t.D, t.rows, t.qd, t.kvd, t.heads, e);
  const parallel::TspSharedBuffers shared{
      .group_forward = group.forward_comm,
      .group_backward = group.backward_comm,
      .dp_reduce_staging = reduce_staging(parallel::tsp_attention_shard_floats(t), t.D, e)};
  return parallel::tsp_resident_set(t, recompute == Recompute::Full, e, shared);
}

std::int64_t comm_buffers_peak(const Shapes& s, const Workload& w) {
  // Gradients are fp32 messages: staged at the communication size like every other (the dry
  // run's profile, docs/planner.md "Dry run").
  const std::int64_t e = w.elem.comm, g = w.elem.comm;
  const int S = s.sp;
  // The step's gradient all-reduces: the largest tensor's staging on each axis it crosses.
  const std::int64_t embed = s.vocab_rows * s.h;
  const std::int64_t largest = std::max({embed, s.qd * s.h, s.ffn * s.h});
  const std::int64_t grads =
      max_of({all_reduce_staging(largest, s.sp, g), all_reduce_staging(largest, s.dp, g),
              all_reduce_staging(s.h, s.seqpar ? s.T : 1, g), all_reduce_staging(s.h, s.D, g)});
  if (s.allgather()) {
    // Its attention and MLP phases as its schedule.h states them (floats); the LM head's and
    // the embedding's are TSP's.
    const TspResident tsp = tsp_resident_set(s, w.recompute, e);
    const auto shapes = parallel::tsp_allgather::make_shapes(s.D, s.block_rows, s.h, s.heads,
                                                             s.kv_heads, s.d, s.ffn);
    const bool full = w.recompute == Recompute::Full;
    return max_of({parallel::tsp_allgather::backward_peak(shapes, full, s.L) * e,
                   tsp.head_forward, tsp.head_backward, tsp.embedding, grads});
  }
  if (s.tsp()) return std::max(tsp_resident_set(s, w.recompute, e).peak_bytes(), grads);

  // The baselines' resident set as their schedule states it (parallel/strategies/mesh/
  // schedule.h), given SP's context-parallel attention and the collectives' staging.
  const std::int64_t Rs = s.stream_rows, Rb = s.block_rows, T = s.T;
  const CpAttention cp = cp_attention(S, Rb, s.qd, s.kvd, s.heads, e);  // 0 at S = 1
  const parallel::MeshSharedBuffers shared{
      .cp_forward = cp.forward_comm,
      .cp_backward = cp.backward_comm,
      .exit_staging = s.seqpar  ? reduce_scatter_staging(Rs * s.h, static_cast<int>(T), e)
                      : T > 1   ? all_reduce_staging(Rb * s.h, static_cast<int>(T), e)
                                : 0,
      .target_staging = all_reduce_staging(Rb, static_cast<int>(T), e)};
  return std::max(parallel::mesh_resident_set(s.mesh_rank(), e, shared).peak_bytes(), grads);
}

std::int64_t workspace_peak(const Shapes& s, const Workload& w, std::int64_t forward_blocks,
                            std::int64_t backward_blocks) {
  const std::int64_t Rs = s.stream_rows, Rb = s.block_rows, h = s.h;
  const std::int64_t rope = s.rope_positions * s.d;  // cos and sin, [positions, d/2] each
  const bool full = w.recompute == Recompute::Full, mlp = w.recompute == Recompute::Mlp;
  const std::int64_t P = s.T > 1 && !s.tsp() ? Rb * h : 0;  // TP partial output
  const std::int64_t r = full ? Rs : 0;  // rstd as workspace when only the input is saved
  // Context-parallel attention (SP, each TSP head group); zeros without a sequence axis.
  const CpAttention cp = cp_attention(s.tsp() ? s.D : s.sp, Rb, s.qd, s.kvd, s.heads, 1);
  // TSP's own buffers beyond the shared blocks' (parallel/strategies/tsp/schedule.h; the
  // allgather schedule projects each group from the gathered weights and keeps nothing aside).
  const parallel::TspWorkspace tsp =
      s.tsp() && !s.allgather() ? parallel::tsp_workspace(s.tsp_rank(), w.recompute != Recompute::Mlp)
              : parallel::TspWorkspace{};
  const auto forward_attention = [&](std::int64_t rstd) {  // x, n, partial, remote out/lse
    return 2 * Rs * h + rstd + P + tsp.attention_forward + cp.forward_workspace;
  };
  const auto forward_mlp = [&](std::int64_t rstd) {
    return 2 * Rs * h + rstd + P + Rb * s.ffn;  // x, n, partial, gated
  };
  std::int64_t backward_mlp = 0, backward_attention = 0;
  if (s.tsp() && !s.allgather()) {
    backward_mlp = 3 * Rs * h + tsp.mlp_backward;
    // The group's backward scratch (its saved q, k, v, out, lse are read in place) and TSP's.
    backward_attention = 3 * Rs * h + cp.backward_workspace + tsp.attention_backward;
  } else {
    backward_mlp = 3 * Rs * h + P + (mlp ? 5 : 3) * Rb * s.ffn;
    // dout, dq, dk, dv: the single-device block's and the context-parallel one's alike (and
    // each head group's under the allgather schedule, whose MLP reads gate/up in place).
    backward_attention = 3 * Rs * h + P + Rb * (2 * s.qd + 2 * s.kvd);
  }
  const std::int64_t head_forward = 2 * Rs * h + 4 * Rb;  // x, nf, stats [3, Rb], lse
  const std::int64_t head_backward = 4 * Rs * h + Rb + P;  // x, nf, dx, dnf, lse, partial
  // dx + the layer's forward re-run.
  const std::int64_t recomputed =
      full ? Rs * h + std::max(forward_attention(0), forward_mlp(0)) : 0;
  const std::int64_t fwd = forward_blocks * Rs * h, bwd = backward_blocks * Rs * h;
  const std::int64_t peak =
      max_of({forward_attention(r) + fwd, forward_mlp(r) + fwd, head_forward + fwd,
              head_backward + bwd, backward_mlp + bwd, backward_attention + bwd,
              recomputed + bwd});
  return (rope + peak) * w.elem.activation;
}

}  // namespace origami::plan
