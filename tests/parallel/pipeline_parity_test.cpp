// Pipeline stages against one device (the parity harness, harness.h): the loss, every gathered
// gradient (per tensor ||a-b||/||b|| <= 1e-5) and, for the *_steps cases, five AdamW steps with
// clipping (losses and parameters <= 1e-4), on the threads transport. pp = 2, 3 and 4 over a
// 5-layer model with uneven splits (4,1; 1,3,1; the balanced 1,2,1,1), fewer micro-batches
// than stages (m < p), as many (m = p) and more (m > p), composed with tsp 2 (both of TSP's
// schedules), dp 2 and the baselines' tp 2 and sp 2. Under the sanitizers a reduced set.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "origami/kernels/threads.h"
#include "../sanitizers.h"
#include "threads_util.h"

namespace origami::parity {
namespace {

using parallel::ParallelConfig;

// 5 layers: every pp up to 4 has an uneven split.
ModelConfig pipeline_model() {
  return make_model(97, 32, 48, 4, 2, 5);
}

ParallelConfig staged(ParallelConfig p, int pp, std::vector<std::int64_t> layers = {}) {
  p.pp = pp;
  p.pp_layers = std::move(layers);
  return p;
}

std::vector<Case> pipeline_cases() {
  std::vector<Case> v;
  auto add = [&](std::string name, ParallelConfig p, int micro, std::int64_t B = 1,
                 Recompute r = Recompute::None, int steps = 0) {
    Case c;
    c.name = std::move(name);
    c.model = pipeline_model();
    c.plan = p;
    c.micro = micro;
    c.batch = B;
    c.seq = 16;
    c.recompute = r;
    c.steps = steps;
    c.max_grad_norm = steps > 0 ? 1.0 : 0.0;
    v.push_back(c);
  };
  const ParallelConfig one = make_plan(1, 1, 1);
  add("pp2_4x1_m1", staged(one, 2, {4, 1}), 1);                       // m < p
  add("pp3_1x3x1_m3", staged(one, 3, {1, 3, 1}), 3, 1, Recompute::Mlp);  // m = p
  add("pp4_balanced_m6_steps", staged(one, 4), 6, 1, Recompute::None, 5);  // m > p
  add("pp2_tsp2_2x3_m3_steps", staged(make_tsp_plan(1, 2), 2, {2, 3}), 3, 2, Recompute::None, 5);
  add("pp2_dp2_m2_steps", staged(make_plan(2, 1, 1), 2, {3, 2}), 2, 2, Recompute::None, 5);
#ifndef ORIGAMI_TESTS_SANITIZED
  add("pp3_tsp2_m2_full", staged(make_tsp_plan(1, 2), 3, {2, 1, 2}), 2, 2, Recompute::Full);
  add("pp4_dp2_m5", staged(make_plan(2, 1, 1), 4), 5, 2);
  ParallelConfig allgather = make_tsp_plan(1, 2);
  allgather.tsp_schedule = parallel::TspSchedule::Allgather;
  add("pp2_tsp2_allgather_m3", staged(allgather, 2, {1, 4}), 3, 2);
  add("pp2_dp2_tsp2_m3", staged(make_tsp_plan(2, 2), 2), 3, 2);
  add("pp2_tp2_m2", staged(make_plan(1, 2, 1), 2, {2, 3}), 2, 2);
  add("pp2_sp2_m3", staged(make_plan(1, 1, 2), 2, {3, 2}), 3, 1);
#endif
  return v;
}

std::string pipeline_case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.name;
}

class PipelineParity : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() { kernels::set_thread_count(1); }
};

TEST_P(PipelineParity, LossGradientsAndStepsEqualOneDevice) {
  const Case& c = GetParam();
  const Data d = make_data(c, c.steps + 1);
  expect_equal(c, run_threads(c, d), run_single(c, d));
}

INSTANTIATE_TEST_SUITE_P(Matrix, PipelineParity, ::testing::ValuesIn(pipeline_cases()),
                         pipeline_case_name);

}  // namespace
}  // namespace origami::parity
