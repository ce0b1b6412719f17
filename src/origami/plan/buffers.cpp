// Communication-buffer and workspace peaks, phase by phase (docs/planner.md). Each phase lists
// what is alive at its peak, as the engine allocates it:
//   model/driver.cpp      x, n, dx, dn [Rs, h]; rstd [Rs] as workspace when not saved; the
//                         layer input's clone under full recompute
//   model/blocks.cpp      MLP gated / dgated / da / du [Rb, f/T], recomputed gate/up (mlp
//                         policy); attention dout, dq [Rb, qd], dk, dv [Rb, kvd]; RoPE tables
//   parallel/mesh_ops.cpp TP partial outputs [Rb, h] (workspace), TP-SP gathered rows [Rb, h]
//                         and reduce-scatter targets [Rs, h] (comm), head stats [3, Rb] + lse
//   parallel/attention_cp.cpp  SP gathered K/V 2·Σ·Rb·kvd + staging Σ·Rb·kvd (forward);
//                         backward adds dK/dV 2·Σ·Rb·kvd
//   parallel/tsp_*.cpp    TSP's resident set (tsp_resident_set)
//   comm/collectives      staging of all-reduce, reduce-scatter and reduce
#include "origami/plan/buffers.h"

#include <algorithm>
#include <initializer_list>

namespace origami::plan {

namespace {
constexpr std::int64_t kReduceChunkBytes = 1 << 20;    // comm/collectives/algorithms.h
constexpr std::int64_t kPipelineChunkBytes = 512 << 10;
constexpr std::int64_t kReduceSlots = 4;                // comm/collectives/reduce.cpp

std::int64_t max_of(std::initializer_list<std::int64_t> v) { return std::max(v); }
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
}  // namespace

std::int64_t all_reduce_staging(std::int64_t count, int n, std::int64_t elem) {
  if (n <= 1 || count <= 0) return 0;
  return 2 * std::min(kReduceChunkBytes, ceil_div(count, n) * elem);
}

std::int64_t reduce_scatter_staging(std::int64_t block, int n, std::int64_t elem) {
  if (n <= 1 || block <= 0) return 0;
  return 2 * std::min(kReduceChunkBytes / elem * elem, block * elem);
}

std::int64_t reduce_staging(std::int64_t count, int n, std::int64_t elem) {
  if (n <= 1 || count <= 0) return 0;
  const std::int64_t bytes = count * elem;
  const std::int64_t chunk = kPipelineChunkBytes / elem * elem;
  return std::min(kReduceSlots, ceil_div(bytes, chunk)) * std::min(chunk, bytes);
}

CpAttention cp_attention(int parts, std::int64_t rows, std::int64_t qd, std::int64_t kvd,
                         std::int64_t comm_elem) {
  CpAttention c;
  const std::int64_t kv = parts * rows * kvd * comm_elem;  // one gathered K (or V)
  c.forward_comm = 3 * kv;  // gathered K, V and the all-gather's staging
  c.backward_comm = 5 * kv + reduce_scatter_staging(rows * kvd, parts, comm_elem);
  c.backward_workspace = rows * (2 * qd + 2 * kvd);  // dout, dq, dk, dv
  return c;
}

std::int64_t TspResident::peak_bytes() const {
  return max_of({attention_forward, attention_backward, mlp_forward, mlp_backward, head_forward,
                 head_backward, embedding});
}

TspResident tsp_resident_set(const Shapes& s, std::int64_t e) {
  const std::int64_t D = s.D, R = s.block_rows;
  const std::int64_t A = 2 * (s.qd + s.kvd) * s.h * e;  // packed attention shard P_j
  const std::int64_t M = 3 * s.ffn * s.h * e;           // packed MLP shard M_j
  const std::int64_t W = s.vocab_rows * s.h * e;        // LM-head block
  const CpAttention group = cp_attention(static_cast<int>(D), R, s.qd, s.kvd, e);
  TspResident r;
  r.attention_forward = 2 * A + group.forward_comm;  // current + prefetched P_j; K/V gather
  // Two shard buffers, the local and the summed dP_j; the group's K/V gather and dK/dV
  // reduce-scatter; then, after those are freed, the dP_j reduce's staging.
  r.attention_backward = 4 * A + std::max(group.backward_comm,
                                          reduce_staging(A / e, static_cast<int>(D), e));
  r.mlp_forward = 2 * M;   // current + incoming shard
  r.mlp_backward = 4 * M;  // two [M | dM]
  r.head_forward = 2 * W;
  r.head_backward = 4 * W;
  r.embedding = 2 * R * s.h * e;  // looked-up rows (ids spread evenly: R) + rows back
  return r;
}

std::int64_t comm_buffers_peak(const Shapes& s, const Workload& w) {
  const std::int64_t e = w.elem.comm, g = w.elem.grad;
  const int S = s.sp;
  // The step's gradient all-reduces: the largest tensor's staging on each axis it crosses.
  const std::int64_t embed = s.vocab_rows * s.h;
  const std::int64_t largest = std::max({embed, s.qd * s.h, s.ffn * s.h});
  const std::int64_t grads =
      max_of({all_reduce_staging(largest, s.sp, g), all_reduce_staging(largest, s.dp, g),
              all_reduce_staging(s.h, s.seqpar ? s.T : 1, g), all_reduce_staging(s.h, s.D, g)});
  if (s.tsp()) return std::max(tsp_resident_set(s, e).peak_bytes(), grads);

  const std::int64_t Rs = s.stream_rows, Rb = s.block_rows, T = s.T;
  const std::int64_t G = s.seqpar ? Rb * s.h * e : 0;  // TP-SP rows gathered for a block
  const std::int64_t reduce = s.seqpar  ? Rs * s.h * e + reduce_scatter_staging(Rs * s.h, T, e)
                              : T > 1 ? all_reduce_staging(Rb * s.h, static_cast<int>(T), e)
                                      : 0;
  // Without sp the block is the single-device one: no gathers (mesh_ops.cpp).
  const CpAttention cp = S > 1 ? cp_attention(S, Rb, s.qd, s.kvd, e) : CpAttention{};
  const std::int64_t attention_forward = std::max(G + cp.forward_comm, reduce);
  const std::int64_t head_forward =
      G + (T > 1 ? 2 * T * Rb * e + all_reduce_staging(Rb, static_cast<int>(T), e) : 0);
  const std::int64_t attention_backward = 2 * G + std::max(cp.backward_comm, reduce);
  const std::int64_t mlp_backward = 2 * G + reduce;
  return max_of({attention_forward, std::max(G, reduce), head_forward, attention_backward,
                 mlp_backward, grads});
}

std::int64_t workspace_peak(const Shapes& s, const Workload& w) {
  const std::int64_t Rs = s.stream_rows, Rb = s.block_rows, h = s.h;
  const std::int64_t rope = s.rope_positions * s.d;  // cos and sin, [positions, d/2] each
  const bool full = w.recompute == Recompute::Full, mlp = w.recompute == Recompute::Mlp;
  const std::int64_t P = s.T > 1 && !s.tsp() ? Rb * h : 0;  // TP partial output
  const std::int64_t r = full ? Rs : 0;  // rstd as workspace when only the input is saved
  const auto forward_attention = [&](std::int64_t rstd) { return 2 * Rs * h + rstd + P; };
  const auto forward_mlp = [&](std::int64_t rstd) {
    return 2 * Rs * h + rstd + P + Rb * s.ffn;  // x, n, partial, gated
  };
  std::int64_t backward_mlp = 0, backward_attention = 0;
  if (s.tsp()) {
    // Gate/up copied out of their slot (or recomputed) + dgated, da, du.
    backward_mlp = 3 * Rs * h + 5 * Rb * s.ffn;
    // q, k, v, out, lse of the head group copied out, then the group's backward scratch.
    backward_attention = 3 * Rs * h + Rb * (2 * s.qd + 2 * s.kvd + s.heads) +
                         cp_attention(s.D, Rb, s.qd, s.kvd, 1).backward_workspace;
  } else {
    backward_mlp = 3 * Rs * h + P + (mlp ? 5 : 3) * Rb * s.ffn;
    // dout, dq, dk, dv: the single-device block's, or the context-parallel one's under sp.
    const std::int64_t scratch = s.sp > 1 ? cp_attention(s.sp, Rb, s.qd, s.kvd, 1).backward_workspace
                                          : Rb * (2 * s.qd + 2 * s.kvd);
    backward_attention = 3 * Rs * h + P + scratch;
  }
  const std::int64_t head_forward = 2 * Rs * h + 4 * Rb;  // x, nf, stats [3, Rb], lse
  const std::int64_t head_backward = 4 * Rs * h + Rb + P;  // x, nf, dx, dnf, lse, partial
  const std::int64_t recomputed = full ? Rs * h + forward_mlp(0) : 0;  // dx + layer forward
  const std::int64_t peak =
      max_of({forward_attention(r), forward_mlp(r), head_forward, head_backward, backward_mlp,
              backward_attention, recomputed});
  return (rope + peak) * w.elem.activation;
}

}  // namespace origami::plan
