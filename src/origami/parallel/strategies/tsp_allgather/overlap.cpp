// schedule.h's overlap: which compute each of the allgather schedule's messages hides behind,
// read off the prefetch order attention.cpp and mlp.cpp follow (one block ahead).
#include "origami/parallel/strategies/tsp_allgather/schedule.h"

namespace origami::parallel::tsp_allgather {

std::vector<TspOverlap> overlap(const Shapes& s, std::int64_t layers,
                                std::int64_t vocab_block_bytes, bool full_recompute,
                                const TspComputeSeconds& c) {
  std::vector<TspOverlap> out;
  const int D = s.degree;
  if (D <= 1) return out;
  const double L = double(layers), F = full_recompute ? 2 * L : L;  // layer forwards
  // One row carries both blocks' weight gathers (and reduce-scatters), two calls per layer
  // pass: the attention's share and the MLP's of that pair, by bytes.
  const double A = double(s.attention), M = double(s.mlp);
  const double att = 2 * A / (A + M), mlp = 2 * M / (A + M);

  // Weight all-gathers. Forward: attention l's behind MLP l-1's forward (layer 0's exposed),
  // MLP l's behind attention l's. Backward: MLP L-1's on demand (exposed), attention l's
  // behind MLP l's backward, MLP l-1's behind attention l's backward; under full recompute
  // each recomputed attention behind the previous attention backward (the first exposed), its
  // MLP's (twice) behind the recomputed attention and MLP forwards.
  std::vector<TspOverlapPosition> gathers{
      {1, att, 0, 0}, {L - 1, att, 0, c.mlp_f}, {L, mlp, 0, c.attention_f}};
  if (full_recompute)
    gathers.insert(gathers.end(), {{1, att, 0, 0},
                                   {L - 1, att, 0, c.attention_b},
                                   {L, mlp, 0, c.attention_f},
                                   {L, mlp, 0, c.mlp_f},
                                   {L, att, 0, c.mlp_b}});
  else
    gathers.insert(gathers.end(),
                   {{1, mlp, 0, 0}, {L, att, 0, c.mlp_b}, {L - 1, mlp, 0, c.attention_b}});
  out.push_back({kTspShards, "all_gather", std::move(gathers)});
  // Weight reduce-scatters: each behind the next block, attention 0's exposed.
  const double after_attention = full_recompute ? c.attention_f : c.mlp_b;
  out.push_back({kTspGrads, "reduce_scatter",
                 {{L, mlp, 0, c.attention_b}, {L - 1, att, 0, after_attention}, {1, att, 0, 0}}});

  // K/V all-gathers and dK/dV reduce-scatters (2 calls per head group), one head group at a
  // time as SP's (attention_cp.cpp) with 1/D of the attention per group: the local rows'
  // products (1/D of the group's) and one projection's backward per group.
  const double Dd = double(D);
  const double kv = kTspKvCallsPerGroup;  // K and V
  out.push_back({kTspAxis, "all_gather",
                 {{F * Dd, kv, 0, c.core_f / (Dd * Dd)},
                  {L * Dd, kv, 0, c.projection_b / Dd + c.core_b / (Dd * Dd)}}});
  out.push_back({kTspAxis, "reduce_scatter", {{L * Dd, kv, 0, c.projection_b / Dd}}});

  // The LM head's ring as TSP's; the only sends.
  std::vector<TspOverlapPosition> ring;
  add_tsp_head_ring(ring, D, vocab_block_bytes, c.head_f, c.head_b);
  out.push_back({kTspShards, "send", std::move(ring)});
  out.push_back({kTspShards, "recv", {}});
  return out;
}

}  // namespace origami::parallel::tsp_allgather
