// A memory estimate before the first allocation (issue 14, item 9): a run that cannot fit is
// refused with exit code 2, the estimate and its largest category, instead of ending in
// std::bad_alloc (hidden_size 10^9) or allocating until the machine refuses (10^5 layers).
#pragma once

#include <cstdint>
#include <optional>

#include "origami/parallel/parallel_config.h"
#include "origami/train/trainer.h"

namespace origami {

// The machine's MemAvailable (/proc/meminfo), if known.
std::optional<std::int64_t> available_memory_bytes();

// The planner's per-rank estimate (plan/cost_model.h) of this run against --memory-cap (per
// rank) and against the available memory for the `ranks_here` ranks that share this machine.
void check_run_memory(const TrainOptions& options, const parallel::ParallelConfig& plan,
                      int ranks_here);

}  // namespace origami
