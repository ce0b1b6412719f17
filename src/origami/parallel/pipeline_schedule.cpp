#include "origami/parallel/pipeline_schedule.h"

#include <algorithm>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::parallel {

namespace {
void check_arguments(int stages, int virtual_stages, int stage, int micro_batches) {
  ORIGAMI_CHECK(stages >= 1 && virtual_stages >= 1 && stage >= 0 && stage < stages &&
                    micro_batches >= 1,
                "pipeline order of rank {} of {} (x {} chunks) over {} micro-batches", stage,
                stages, virtual_stages, micro_batches);
}
}  // namespace

void check_pipeline_schedule(int stages, int virtual_stages, int micro_batches) {
  if (virtual_stages > 1 && micro_batches % stages != 0)
    throw ConfigError(fmt::format(
        "--grad-accum {} under pp={} with --pp-virtual {}: the interleaved schedule sends the "
        "micro-batches through each rank's chunks in groups of pp, so the micro-batch count "
        "must be a multiple of {}; use --grad-accum {} (or --pp-virtual 1)",
        micro_batches, stages, virtual_stages, stages,
        std::max(stages, micro_batches / stages * stages)));
}

int pipeline_warmup(int stages, int virtual_stages, int stage, int micro_batches) {
  check_arguments(stages, virtual_stages, stage, micro_batches);
  if (virtual_stages == 1) return std::min(stages - 1 - stage, micro_batches);
  return std::min((stages - stage - 1) * 2 + (virtual_stages - 1) * stages,
                  micro_batches * virtual_stages);
}

std::vector<PipelineStep> pipeline_order(int stages, int virtual_stages, int stage,
                                         int micro_batches) {
  check_pipeline_schedule(stages, virtual_stages, micro_batches);
  const int p = stages, v = virtual_stages, passes = micro_batches * virtual_stages;
  const int warmup = pipeline_warmup(p, v, stage, micro_batches);
  // Virtual micro-batch k: micro-batch (k div pv) p + k mod p on chunk (k mod pv) div p, the
  // chunks in reverse for the backward. With v = 1 this is micro-batch k on chunk 0.
  const auto pass = [p, v](int k, bool backward) {
    const int in_group = k % (p * v);
    const int chunk = in_group / p;
    return PipelineStep{(k / (p * v)) * p + in_group % p, backward,
                        backward ? v - 1 - chunk : chunk};
  };
  std::vector<PipelineStep> order;
  int forward = 0, backward = 0;
  for (; forward < warmup; ++forward) order.push_back(pass(forward, false));
  for (; forward < passes; ++forward, ++backward) {
    order.push_back(pass(forward, false));
    order.push_back(pass(backward, true));
  }
  for (; backward < passes; ++backward) order.push_back(pass(backward, true));
  return order;
}

int pipeline_in_flight(int stages, int virtual_stages, int stage, int micro_batches) {
  return std::min(pipeline_warmup(stages, virtual_stages, stage, micro_batches) + 1,
                  micro_batches * virtual_stages);
}

double pipeline_bubble(int stages, int virtual_stages, int micro_batches) {
  return static_cast<double>(stages - 1) /
         static_cast<double>(micro_batches * virtual_stages + stages - 1);
}

double pipeline_bubble_of_busy(int stages, int virtual_stages, int micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches * virtual_stages);
}

}  // namespace origami::parallel
