// The 1F1B (one forward, one backward; non-interleaved) pipeline schedule: the order in which
// each stage runs its micro-batches' forwards and backwards (docs/strategies.md, "Pipeline
// stages", has the diagram). Stage s of p runs min(p - 1 - s, m) warm-up forwards, then one
// forward and one backward in turn, then the remaining backwards, so it holds at most
// min(p - s, m) micro-batches' activations at once (stage 0 the most) and its neighbours'
// messages arrive in the order it consumes them.
#pragma once

#include <vector>

namespace origami::parallel {

struct PipelineStep {
  int micro = 0;          // the micro-batch, 0 .. m-1
  bool backward = false;  // its forward, or its backward
};

// Stage `stage` (0 .. stages-1)'s order over `micro_batches` micro-batches (>= 1).
std::vector<PipelineStep> one_f_one_b_order(int stages, int stage, int micro_batches);

// The most micro-batches stage `stage` holds in flight (forward run, backward not yet):
// min(stages - stage, micro_batches).
int one_f_one_b_in_flight(int stages, int stage, int micro_batches);

// The idle fraction of a 1F1B step with equal stage times (every forward one slot, every
// backward the same number of slots): (p - 1) / (m + p - 1) of the step, which is (p - 1) / m
// of the busy time, the figure usually quoted.
double one_f_one_b_bubble(int stages, int micro_batches);

}  // namespace origami::parallel
