// The bytes and resident sets of schedule.h, phase by phase as tsp_*.cpp issue and allocate them.
#include "origami/parallel/strategies/tsp/schedule.h"

#include <initializer_list>

#include "origami/comm/collectives/bytes_sent.h"

namespace origami::parallel {

std::vector<TspTraffic> tsp_traffic(const TspRankShapes& s, std::int64_t e, bool full_recompute) {
  std::vector<TspTraffic> out;
  const int D = s.D;
  if (D <= 1) return out;
  const std::int64_t L = s.L, rerun = full_recompute ? L : 0;
  const std::int64_t A = tsp_attention_shard_floats(s) * e, M = tsp_mlp_shard_floats(s) * e;
  const std::int64_t W = s.vocab_rows * s.h * e, k = tsp_head_chunks(s);
  const std::int64_t kv = s.rows * s.kvd * e;  // one rank's K (or V) rows of a head group
  const auto add = [&](const char* block, const char* comm, const char* op, bool forward,
                       bool in_layers, std::int64_t calls, std::int64_t bytes) {
    out.push_back({block, comm, op, forward, in_layers, calls, bytes});
  };
  constexpr bool kFwd = true, kBwd = false, kLayer = true, kModel = false;
  // Attention: D broadcasts per layer pass; a pipelined chain broadcast is sent by every rank
  // of the chain but its last, and over the D roots each rank is the last once: (D-1)·A.
  add("attention", kTspShards, "broadcast", kFwd, kLayer, L * D, L * (D - 1) * A);
  add("attention", kTspShards, "broadcast", kBwd, kLayer, (rerun + L) * D,
      (rerun + L) * (D - 1) * A);
  // MLP ring: forward D-1 hops of M per layer. Backward (GradRing) moves the weights and the
  // accumulator as separate messages: D-1 weight hops and D accumulator hops (the last one
  // brings it home), 2D-1 sends of M.
  add("mlp", kTspShards, "send", kFwd, kLayer, L * (D - 1), L * (D - 1) * M);
  add("mlp", kTspShards, "send", kBwd, kLayer, rerun * (D - 1), rerun * (D - 1) * M);
  add("mlp", kTspShards, "send", kBwd, kLayer, L * (2 * D - 1), L * (2 * D - 1) * M);
  // LM head, once per model: the same rings, each vocabulary block in k chunk messages per
  // hop (the same bytes).
  add("head", kTspShards, "send", kFwd, kModel, k * (D - 1), (D - 1) * W);
  add("head", kTspShards, "send", kBwd, kModel, k * (2 * D - 1), (2 * D - 1) * W);
  // Every send has its matching receive (no bytes sent).
  add("mlp", kTspShards, "recv", kFwd, kLayer, L * (D - 1), 0);
  add("mlp", kTspShards, "recv", kBwd, kLayer, rerun * (D - 1) + L * (2 * D - 1), 0);
  add("head", kTspShards, "recv", kFwd, kModel, k * (D - 1), 0);
  add("head", kTspShards, "recv", kBwd, kModel, k * (2 * D - 1), 0);
  // Each head group's K and V gathered in forward and re-gathered in backward; dK, dV
  // reduce-scattered.
  add("attention", kTspAxis, "all_gather", kFwd, kLayer, 2 * D * L,
      2 * D * L * comm::ring_blocks_sent(kv, D));
  add("attention", kTspAxis, "all_gather", kBwd, kLayer, 2 * D * (rerun + L),
      2 * D * (rerun + L) * comm::ring_blocks_sent(kv, D));
  add("attention", kTspAxis, "reduce_scatter", kBwd, kLayer, 2 * D * L,
      2 * D * L * comm::ring_blocks_sent(kv, D));
  // dP_j reduced to its owner: a chain reduce is sent by every rank but the root.
  add("attention", kTspGrads, "reduce", kBwd, kLayer, D * L, L * (D - 1) * A);
  // Embedding: counts (8-byte integers), ids (4 bytes) and rows forward; row gradients
  // backward. Ids spread evenly over the D vocabulary blocks (the real split is data
  // dependent).
  const std::int64_t foreign = s.rows * (D - 1) / D;
  add("embedding", kTspAxis, "all_to_all", kFwd, kModel, 1, (D - 1) * 8);
  add("embedding", kTspAxis, "all_to_all", kFwd, kModel, 1, foreign * 4);
  add("embedding", kTspAxis, "all_to_all", kFwd, kModel, 1, foreign * s.h * e);
  add("embedding", kTspAxis, "all_to_all", kBwd, kModel, 1, foreign * s.h * e);
  return out;
}

std::int64_t TspResident::peak_bytes() const {
  return std::max({attention_forward, attention_backward, mlp_forward, mlp_backward,
                   head_forward, head_backward, embedding});
}

TspResident tsp_resident_set(const TspRankShapes& s, bool full_recompute, std::int64_t e,
                             const TspSharedBuffers& shared) {
  const std::int64_t D = s.D, R = s.rows;
  const std::int64_t A = tsp_attention_shard_floats(s) * e;  // packed attention shard P_j
  const std::int64_t M = tsp_mlp_shard_floats(s) * e;        // packed MLP shard M_j
  const std::int64_t W = tsp_head_chunk_rows(s) * s.h * e;   // LM-head ring chunk
  const std::int64_t kv = 2 * D * R * s.kvd * e;             // one head group's K/V gathers
  // The next attention call's prefetched shards, broadcast behind the MLP (and head) that
  // precede it: held in the MLP phases of layers 0..L-2 in forward and, in backward, of every
  // layer whose attention backward is preceded by another one (layers 0..L-2) or by a
  // recomputed forward.
  const std::int64_t prefetched =
      s.L >= 2 || full_recompute ? std::min(kTspPrefetchedShards, s.D) * A : 0;
  TspResident r;
  // Two shard buffers; group j+1's gathers in flight while group j's are replaced by its
  // remote rows.
  r.attention_forward = 2 * A + kv + shared.group_forward;
  // Two shard buffers, min(D, 3) local dP_j and the owner's sum; group j+1's re-gather (or
  // group j-1's reduce-scatter inputs) besides group j's own; the dP_j reduce's staging
  // (timing dependent: whether it overlaps the peak, the upper bound).
  r.reduce_staging = shared.dp_reduce_staging;
  r.attention_backward = (3 + std::min<std::int64_t>(D, 3)) * A + kv + shared.group_backward +
                         r.reduce_staging;
  r.mlp_forward = 2 * M + prefetched;  // current + incoming shard
  // Weights current + incoming, the incoming accumulator, Δ being written + Δ being sent.
  r.mlp_backward = 5 * M + prefetched;
  r.head_forward = 2 * W;
  r.head_backward = 5 * W;
  r.embedding = 2 * R * s.h * e;  // looked-up rows (ids spread evenly: R) + rows back
  return r;
}

TspWorkspace tsp_workspace(const TspRankShapes& s, bool mlp_saved) {
  TspWorkspace w;
  w.attention_forward = 2 * s.h * s.qd;
  w.attention_backward = 2 * s.rows * s.kvd + 2 * s.kvd * s.h;
  // dgated, da, du of one shard (mlp_block_backward); gate/up besides when recomputed.
  w.mlp_backward = (mlp_saved ? 3 : 5) * s.rows * s.ffn;
  return w;
}

}  // namespace origami::parallel
