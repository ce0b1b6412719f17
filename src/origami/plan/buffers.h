// Peaks of the two transient memory categories, derived phase by phase from what the engine's
// blocks allocate (docs/planner.md, "Communication buffers" and "Workspace"): the resident
// set of each schedule's communication (gathered rows and K/V, TSP's foreign shards and
// travelling accumulators, the collectives' staging) and the blocks' temporaries (normed rows,
// partial outputs, backward scratch, RoPE tables).
#pragma once

#include <cstdint>

#include "origami/plan/shapes.h"

namespace origami::plan {

// TSP's resident communication buffers per phase, in elements of the communication type
// (docs/tsp.md, "Resident set per phase"), plus the collectives' staging in bytes. ONE
// function so a schedule change (a prefetch of the next layer's shard 0, K/V gather staging)
// is one edit here.
struct TspResident {
  std::int64_t attention_forward = 0, attention_backward = 0, mlp_forward = 0,
               mlp_backward = 0, head_forward = 0, head_backward = 0, embedding = 0;
  std::int64_t attention_backward_staging_bytes = 0;  // the reduce-scatter's / reduce's staging
  std::int64_t peak_bytes(std::int64_t comm_elem) const;
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
