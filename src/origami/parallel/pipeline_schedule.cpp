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

double PipelineClock::bubble() const {
  if (step_s <= 0 || busy.empty()) return 0;
  return 1.0 - *std::max_element(busy.begin(), busy.end()) / step_s;
}

PipelineClock pipeline_seconds(const std::vector<double>& forward_s,
                               const std::vector<double>& backward_s, int stages,
                               int virtual_stages, int micro_batches, double hop_forward_s,
                               double hop_backward_s) {
  const int p = stages, m = micro_batches, chunks = stages * virtual_stages;
  ORIGAMI_CHECK(
      static_cast<int>(forward_s.size()) == chunks && static_cast<int>(backward_s.size()) == chunks,
      "pipeline clock of {} chunks given {} forward and {} backward times", chunks,
      forward_s.size(), backward_s.size());
  std::vector<std::vector<PipelineStep>> order;
  for (int s = 0; s < p; ++s) order.push_back(pipeline_order(p, virtual_stages, s, m));
  const auto at = [m](int chunk, int micro) { return static_cast<std::size_t>(chunk * m + micro); };
  // When each pass ends (negative: not run yet), per chunk and micro-batch.
  std::vector<double> forward_end(static_cast<std::size_t>(chunks * m), -1),
      backward_end = forward_end;
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> free_at(static_cast<std::size_t>(p), 0);
  PipelineClock clock;
  clock.busy.assign(static_cast<std::size_t>(p), 0);
  // Each round runs every rank's next pass whose input is there; the orders never deadlock
  // (tests/parallel/pipeline_stages_test.cpp), so some rank moves every round.
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < p; ++s) {
      const auto us = static_cast<std::size_t>(s);
      if (next[us] == order[us].size()) continue;
      const PipelineStep& step = order[us][next[us]];
      const int c = step.chunk * p + s;  // PipelineSplit::chunk_of
      double ready = 0;
      if (!step.backward && c > 0) {
        ready = forward_end[at(c - 1, step.micro)];
        if (ready < 0) continue;
        ready += hop_forward_s;
      } else if (step.backward && c < chunks - 1) {
        ready = backward_end[at(c + 1, step.micro)];
        if (ready < 0) continue;
        ready += hop_backward_s;
      } else if (step.backward) {
        ready = forward_end[at(c, step.micro)];  // run before on this rank
      }
      const auto uc = static_cast<std::size_t>(c);
      const double took = step.backward ? backward_s[uc] : forward_s[uc];
      const double end = std::max(free_at[us], ready) + took;
      (step.backward ? backward_end : forward_end)[at(c, step.micro)] = end;
      free_at[us] = end;
      clock.busy[us] += took;
      clock.step_s = std::max(clock.step_s, end);
      ++next[us];
      moved = true;
    }
  }
  for (int s = 0; s < p; ++s)
    ORIGAMI_CHECK(next[static_cast<std::size_t>(s)] == order[static_cast<std::size_t>(s)].size(),
                  "pipeline clock: rank {} of {} stalled", s, p);
  return clock;
}

}  // namespace origami::parallel
