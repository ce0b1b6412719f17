// Peaks of the two transient memory categories, derived phase by phase from what the engine's
// blocks allocate (docs/planner.md, "Communication buffers" and "Workspace"): the resident
// set of each schedule's communication (gathered rows and K/V, TSP's foreign shards and
// travelling accumulators, the collectives' staging) and the blocks' temporaries (normed rows,
// partial outputs, backward scratch, RoPE tables).
#pragma once

#include <cstdint>

#include "origami/plan/shapes.h"

namespace origami::plan {

// Context-parallel attention (parallel/attention_cp.cpp) over `parts` ranks of `rows` local
// rows (TSP gathers even at parts = 1; SP uses the single-device block then): the gathered K, V
// and the all-gather's staging in forward (3·parts·rows·kvd elements); in backward the
// gathered K, V, dK, dV and the staging (5·parts·rows·kvd) plus the reduce-scatter's staging,
// in bytes; the backward's workspace dout, dq, dk, dv in elements. SP and every TSP head group
// use it: ONE function to adjust when attention_cp.cpp's buffers change.
struct CpAttention {
  std::int64_t forward_comm = 0, backward_comm = 0;  // bytes
  std::int64_t backward_workspace = 0;               // elements
};
CpAttention cp_attention(int parts, std::int64_t rows, std::int64_t qd, std::int64_t kvd,
                         std::int64_t comm_elem);

// TSP's resident communication buffers per phase, in bytes (docs/tsp.md, "Resident set per
// phase"), the collectives' staging included. ONE function so a schedule change (a prefetch
// of the next layer's shard 0, K/V gather staging) is one edit here.
struct TspResident {
  std::int64_t attention_forward = 0, attention_backward = 0, mlp_forward = 0,
               mlp_backward = 0, head_forward = 0, head_backward = 0, embedding = 0;
  std::int64_t peak_bytes() const;
};
TspResident tsp_resident_set(const Shapes& s, std::int64_t comm_elem);

// Peak bytes of MemCategory::CommBuffers over one micro-batch's forward+backward and the
// step's gradient all-reduces.
std::int64_t comm_buffers_peak(const Shapes& s, const Workload& w);
// Peak bytes of MemCategory::Workspace over one micro-batch's forward+backward.
std::int64_t workspace_peak(const Shapes& s, const Workload& w);

// Staging bytes the collectives allocate (comm/collectives/*.cpp): a ring all-reduce of
// `count` elements over n ranks two chunks of min(1 MiB, largest block); a reduce-scatter
// with `block` elements per rank two chunks of min(1 MiB, block); a chain reduce on a
// receiving rank min(4, chunks) slots of min(512 KiB, buffer).
std::int64_t all_reduce_staging(std::int64_t count, int n, std::int64_t elem);
std::int64_t reduce_scatter_staging(std::int64_t block, int n, std::int64_t elem);
std::int64_t reduce_staging(std::int64_t count, int n, std::int64_t elem);

}  // namespace origami::plan
