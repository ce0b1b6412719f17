// schedule.h's tsp_overlap: which compute each of TSP's messages hides behind, read off the
// order tsp_attention.cpp, tsp_mlp.cpp, tsp_head.cpp and GradRing issue and wait them.
#include <algorithm>

#include "origami/parallel/strategies/tsp/schedule.h"

namespace origami::parallel {

namespace {

using Positions = std::vector<TspOverlapPosition>;

// The shard broadcasts of `passes` attention calls of one kind whose groups take g seconds
// each. An unprefetched call (the first of its kind when `first_prefetched` is false) starts
// P_i (i < kTspShardBuffers) itself and waits for it after i groups; a prefetched call finds
// kTspPrefetchedShards of them started behind the `before` seconds that precede it and starts
// the rest itself. Every later P_j is broadcast kTspShardBuffers groups ahead of its use.
void add_broadcasts(Positions& out, int D, double passes, bool first_prefetched, double g,
                    double before) {
  const int buffers = std::min(kTspShardBuffers, D);
  const int prefetched = std::min(kTspPrefetchedShards, buffers);
  const double ahead = passes - (first_prefetched ? 0 : 1);  // calls that find a prefetch
  if (!first_prefetched)
    for (int i = 0; i < buffers; ++i) out.push_back({1, 1, 0, i * g});
  out.push_back({ahead, double(prefetched), 0, before});
  for (int i = prefetched; i < buffers; ++i) out.push_back({ahead, 1, 0, i * g});
  out.push_back({passes * (D - buffers), 1, 0, kTspShardBuffers * g});
}

// A backward ring of D steps (GradRing) of `hop` bytes, `passes` times: the first step sends
// only the weight shard, the last only the accumulator, the D-2 between both, each behind one
// shard's backward (`step` seconds); then the accumulator's hop home, waited at once.
void add_backward_ring(Positions& out, int D, double passes, std::int64_t hop, double step) {
  out.push_back({2 * passes, 1, hop, step});
  out.push_back({passes * (D - 2), 2, hop, step});
  out.push_back({passes, 1, hop, 0});
}

}  // namespace

void add_tsp_head_ring(std::vector<TspOverlapPosition>& out, int D, std::int64_t block_bytes,
                       double head_f, double head_b) {
  out.push_back({double(D - 1), 1, block_bytes, head_f / D});
  add_backward_ring(out, D, 1, block_bytes, head_b / D);
}

std::vector<TspOverlap> tsp_overlap(const TspRankShapes& s, std::int64_t elem,
                                    bool full_recompute, const TspComputeSeconds& c) {
  std::vector<TspOverlap> out;
  const int D = s.D;
  if (D <= 1) return out;
  const double L = double(s.L), F = full_recompute ? 2 * L : L;  // layer forwards
  const double gf = c.attention_f / D, gb = c.attention_b / D;   // one head group
  const int kv = kTspKvCallsPerGroup;

  // P_j broadcasts. Forward calls: layer 0's unprefetched, the others' prefetched behind the
  // MLP forward before them; under full recompute each recomputed forward but the first
  // prefetched behind the last kTspShardBuffers groups of the attention backward before it.
  // Backward calls: prefetched behind the MLP backward before them (and the recomputed MLP
  // forward under full recompute, whose forward then prefetched the last layer's too).
  Positions broadcast;
  add_broadcasts(broadcast, D, L, false, gf, c.mlp_f);
  if (full_recompute) add_broadcasts(broadcast, D, L, false, gf, kTspShardBuffers * gb);
  add_broadcasts(broadcast, D, L, full_recompute, gb,
                 full_recompute ? c.mlp_f + c.mlp_b : c.mlp_b);
  out.push_back({kTspShards, "broadcast", std::move(broadcast)});

  // K/V all-gathers: group 0's behind its own local rows (g/D), every later group's behind
  // the previous group's remote rows and its own local rows (g).
  out.push_back({kTspAxis, "all_gather",
                 {{F, kv, 0, gf / D}, {F * (D - 1), kv, 0, gf},
                  {L, kv, 0, gb / D}, {L * (D - 1), kv, 0, gb}}});
  // dK/dV reduce-scatters and dP_j reduces: every group's but the last behind the next
  // group; the last group's are waited at once.
  out.push_back({kTspAxis, "reduce_scatter", {{L * (D - 1), kv, 0, gb}, {L, kv, 0, 0}}});
  out.push_back({kTspGrads, "reduce", {{L * (D - 1), 1, 0, gb}, {L, 1, 0, 0}}});

  // The rings: a forward hop behind one shard's GEMMs, the backward as add_backward_ring;
  // the MLP's shard M_j per layer forward, the head's vocabulary block (its chunks carry the
  // same bytes) once.
  const std::int64_t M = tsp_mlp_shard_floats(s) * elem, W = s.vocab_rows * s.h * elem;
  Positions ring{{F * (D - 1), 1, M, c.mlp_f / D}};
  add_backward_ring(ring, D, L, M, c.mlp_b / D);
  add_tsp_head_ring(ring, D, W, c.head_f, c.head_b);
  out.push_back({kTspShards, "send", std::move(ring)});
  out.push_back({kTspShards, "recv", {}});
  return out;
}

}  // namespace origami::parallel
