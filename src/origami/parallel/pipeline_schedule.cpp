#include "origami/parallel/pipeline_schedule.h"

#include <algorithm>

#include "origami/core/error.h"

namespace origami::parallel {

std::vector<PipelineStep> one_f_one_b_order(int stages, int stage, int micro_batches) {
  ORIGAMI_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1,
                "1F1B order of stage {} of {} over {} micro-batches", stage, stages,
                micro_batches);
  const int warmup = std::min(stages - 1 - stage, micro_batches);
  std::vector<PipelineStep> order;
  int forward = 0, backward = 0;
  for (; forward < warmup; ++forward) order.push_back({forward, false});
  for (; forward < micro_batches; ++forward, ++backward) {
    order.push_back({forward, false});
    order.push_back({backward, true});
  }
  for (; backward < micro_batches; ++backward) order.push_back({backward, true});
  return order;
}

int one_f_one_b_in_flight(int stages, int stage, int micro_batches) {
  return std::min(stages - stage, micro_batches);
}

double one_f_one_b_bubble(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

}  // namespace origami::parallel
