// The shapes one rank works on under a layout (docs/planner.md, "Per-rank shapes"): shared by
// the memory, buffer and communication models of src/origami/plan/.
#pragma once

#include <algorithm>
#include <cstdint>

#include "origami/parallel/parallel_config.h"
#include "origami/parallel/strategies/mesh/schedule.h"
#include "origami/parallel/strategies/tsp/schedule.h"
#include "origami/plan/cost_model.h"

namespace origami::plan {

struct Shapes {
  std::int64_t h, d, L, H, Hkv, f, V;  // the model
  int T;                      // weight-sharding degree: tp, or D under TSP
  int D;                      // TSP degree (1 for the baselines)
  int sp;                     // the baselines' sequence degree
  int dp;                     // data-parallel degree
  bool seqpar;                // TP-SP regions
  std::int64_t heads, kv_heads, ffn, vocab_rows;  // this rank's (under TSP: one head group's)
  std::int64_t qd, kvd;       // heads·d, kv_heads·d
  std::int64_t block_rows;    // B/dp · S/sp (S/D under TSP): the rows a block computes on
  std::int64_t stream_rows;   // the residual stream's rows (block_rows / tp under TP-SP)
  std::int64_t rope_positions;  // rows of the RoPE tables: max(max_position_embeddings, S)
  bool tied;                  // tie_word_embeddings: one vocabulary table, no separate head
  parallel::TspSchedule schedule;  // TSP's (broadcast-ring or allgather)
  bool tsp() const { return D > 1; }
  bool allgather() const { return tsp() && schedule == parallel::TspSchedule::Allgather; }
  // What a rank of the TSP axis works on (parallel/strategies/tsp/schedule.h states TSP's
  // bytes and resident set in these terms).
  parallel::TspRankShapes tsp_rank() const {
    return {.D = D, .L = L, .h = h, .rows = block_rows, .heads = heads, .qd = qd, .kvd = kvd,
            .ffn = ffn, .vocab_rows = vocab_rows};
  }
  // What a rank of the baselines' T x Σ mesh works on (parallel/strategies/mesh/schedule.h
  // states their messages in these terms).
  parallel::MeshRankShapes mesh_rank() const {
    return {.T = T, .S = sp, .seqpar = seqpar, .L = L, .h = h, .rows = block_rows, .kvd = kvd};
  }
  // TSP's LM-head ring moves each vocabulary block in chunks: the rows of a full chunk, and
  // the number of chunks (messages per hop).
  std::int64_t head_chunk_rows() const { return parallel::tsp_head_chunk_rows(tsp_rank()); }
  std::int64_t head_chunks() const { return parallel::tsp_head_chunks(tsp_rank()); }
};

// Validates the layout (check_layout) and derives the shapes.
Shapes shapes_of(const ModelConfig& m, const Mesh& mesh, const Workload& w);

}  // namespace origami::plan
