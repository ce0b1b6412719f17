// The pipeline schedules: the order in which each pp rank runs its micro-batches' forwards and
// backwards over its model chunks (pipeline_stages.h maps chunks to ranks; docs/strategies.md,
// "Pipeline stages", has the diagrams). p ranks, v chunks each, m micro-batches.
//   v = 1, 1F1B (non-interleaved; PipeDream-flush): rank s runs min(p - 1 - s, m) warm-up
//     forwards, then one forward and one backward in turn, then the remaining backwards.
//   v > 1, interleaved 1F1B (Megatron-LM, Narayanan et al. 2021): the m x v chunk passes of
//     a rank in "virtual micro-batch" order k = 0 .. m v - 1, groups of p micro-batches going
//     through chunk 0, then chunk 1, ...: forward k is micro-batch (k div pv) p + k mod p on
//     local chunk (k mod pv) div p; backward k the same micro-batch on local chunk
//     v - 1 - (k mod pv) div p. Warm-up: min((p - s - 1) x 2 + (v - 1) p, m v) forwards, then
//     forward k + warm-up and backward k in turn, then the remaining backwards. Needs m a
//     multiple of p (check_pipeline_schedule), as Megatron does.
// Either way a rank holds at most min(warm-up + 1, m v) chunk passes' activations at once
// (rank 0 the most), each direction's messages arrive in the order the rank consumes them,
// and on the last rank the head's forward of a micro-batch is followed at once by its
// backward (so the head keeps one micro-batch's state). tests/parallel/pipeline_stages_test
// runs every order on a slot clock against these formulas.
#pragma once

#include <vector>

namespace origami::parallel {

struct PipelineStep {
  int micro = 0;          // the micro-batch, 0 .. m-1
  bool backward = false;  // its forward, or its backward
  int chunk = 0;          // the rank's local chunk, 0 .. v-1 (PipelineSplit::chunk_of)
};

// Refuses (ConfigError naming --grad-accum) a schedule that cannot run: the interleaved one
// (virtual_stages > 1) over a micro-batch count that is not a multiple of the stages.
void check_pipeline_schedule(int stages, int virtual_stages, int micro_batches);

// Rank `stage` (0 .. stages-1)'s order over `micro_batches` micro-batches (>= 1), each going
// through `virtual_stages` chunks of the rank (the rules above).
std::vector<PipelineStep> pipeline_order(int stages, int virtual_stages, int stage,
                                         int micro_batches);

// The forwards rank `stage` runs before its first backward.
int pipeline_warmup(int stages, int virtual_stages, int stage, int micro_batches);

// The most chunk passes rank `stage` holds in flight (forward run, backward not yet):
// min(warm-up + 1, m v); with v = 1 that is min(stages - stage, m).
int pipeline_in_flight(int stages, int virtual_stages, int stage, int micro_batches);

// THE bubble formula. With equal chunk times (every chunk's forward one slot, every backward
// the same number of slots) a step lasts (m v + p - 1) chunk passes, of which each rank is
// busy m v: idle (p - 1) / (m v + p - 1) of the step (pipeline_bubble), which is (p - 1) / (v m)
// of the busy time (pipeline_bubble_of_busy, the figure usually quoted; (p - 1) / m for 1F1B).
double pipeline_bubble(int stages, int virtual_stages, int micro_batches);
double pipeline_bubble_of_busy(int stages, int virtual_stages, int micro_batches);

// The schedule on a clock, for unequal chunks (the planner's step time, docs/planner.md
// "Pipeline step time"): global chunk c's forward takes forward_s[c] and its backward
// backward_s[c] (p x v entries each); a pass starts when its rank is free and its input is
// there: the previous chunk's forward (chunk 0: at once), the next chunk's backward (the last
// chunk: its own forward), a neighbour's output arriving `hop_forward_s` (activations) or
// `hop_backward_s` (gradients) after that pass ends (sends do not hold up the sender). Every
// rank replays pipeline_order. With equal chunks and no hops the step is the bubble formula's,
// (m v + p - 1) x (f + b).
struct PipelineClock {
  double step_s = 0;         // the last pass's end
  std::vector<double> busy;  // per rank: the sum of its passes' times
  // Idle share of the step on the busiest rank, 1 - max busy / step: pipeline_bubble with
  // equal chunks and no hops.
  double bubble() const;
};
PipelineClock pipeline_seconds(const std::vector<double>& forward_s,
                               const std::vector<double>& backward_s, int stages,
                               int virtual_stages, int micro_batches, double hop_forward_s = 0,
                               double hop_backward_s = 0);

}  // namespace origami::parallel
