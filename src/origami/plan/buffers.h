// Peaks of the two transient memory categories, derived phase by phase from what the engine's
// blocks allocate (docs/planner.md, "Communication buffers" and "Workspace"): the resident
// set of each schedule's communication (gathered rows and K/V, TSP's foreign shards and
// travelling accumulators, the collectives' staging) and the blocks' temporaries (normed rows,
// partial outputs, backward scratch, RoPE tables).
#pragma once

#include <cstdint>

#include "origami/plan/shapes.h"

namespace origami::plan {

// Context-parallel attention (parallel/attention_cp.cpp) over `parts` >= 2 ranks of `rows`
// local rows, c = rows·kvd (every field 0 at parts = 1: the single-device block, no gathers).
// Forward: the K/V all-gathers 2·parts·c, each replaced by its remote rows (parts−1)·c once
// waited: (3·parts−1)·c; Workspace gains the remote rows' partial output rows·qd and its
// log-sum-exp rows·heads. Backward: the re-gather as forward, then remote K/V + remote dK/dV
// 4(parts−1)·c, then the reduce-scatter inputs 2·parts·c + the ring's staging:
// max((3·parts−1)·c, 4(parts−1)·c, 2·parts·c + staging), in bytes; its Workspace dout, dq,
// dk, dv in elements. SP and every TSP head group use it: ONE function to adjust when
// attention_cp.cpp's buffers change.
struct CpAttention {
  std::int64_t forward_comm = 0, backward_comm = 0;           // bytes
  std::int64_t forward_workspace = 0, backward_workspace = 0;  // elements
};
CpAttention cp_attention(int parts, std::int64_t rows, std::int64_t qd, std::int64_t kvd,
                         std::int64_t heads, std::int64_t comm_elem);

// TSP's resident communication buffers per phase, in bytes: its schedule's
// (parallel/strategies/tsp/schedule.h, tsp_resident_set) with the shared buffers it names
// (cp_attention of one head group, the dP_j reduce's staging) from the models below.
using TspResident = parallel::TspResident;
TspResident tsp_resident_set(const Shapes& s, Recompute r, std::int64_t comm_elem);

std::int64_t comm_buffers_peak(const Shapes& s, const Workload& w);
// Peak bytes of MemCategory::Workspace over one micro-batch's forward+backward; with pipeline
// stages `forward_blocks` (`backward_blocks`) stream blocks [Rs, h] more (or fewer) during
// the forward (backward) phases (parallel/pipeline_boundary.h).
std::int64_t workspace_peak(const Shapes& s, const Workload& w, std::int64_t forward_blocks = 0,
                            std::int64_t backward_blocks = 0);

// Staging bytes the collectives allocate (comm/collectives/*.cpp): a ring all-reduce of
// `count` elements over n ranks two chunks of min(1 MiB, largest block); a reduce-scatter
// with `block` elements per rank two chunks of min(1 MiB, block); a chain reduce on a
// receiving rank min(4, chunks) slots of min(512 KiB, buffer).
std::int64_t all_reduce_staging(std::int64_t count, int n, std::int64_t elem);
std::int64_t reduce_scatter_staging(std::int64_t block, int n, std::int64_t elem);
std::int64_t reduce_staging(std::int64_t count, int n, std::int64_t elem);

}  // namespace origami::plan
