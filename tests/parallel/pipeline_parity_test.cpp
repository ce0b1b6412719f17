// Pipeline stages against one device (the parity harness, harness.h): the loss, every gathered
// gradient (per tensor ||a-b||/||b|| <= 1e-5) and, for the *_steps cases, five AdamW steps with
// clipping (losses and parameters <= 1e-4), on the threads transport. pp = 2, 3 and 4 over a
// 5-layer model with uneven splits (4,1; 1,3,1; the balanced 1,2,1,1), fewer micro-batches
// than stages (m < p), as many (m = p) and more (m > p), composed with tsp 2 (both of TSP's
// schedules), dp 2 and the baselines' tp 2 (with and without sequence-parallel regions) and
// sp 2. Under the sanitizers a reduced set. And the tracker's view of each stage's
// micro-batches in flight.
#include <gtest/gtest.h>

#include <algorithm>

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
  add("pp2_tpsp2_m2", staged(make_plan(1, 2, 1, true), 2, {2, 3}), 2, 2);  // sharded stream rows
#endif
  return v;
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
                         case_name);

// The tracker sees 1F1B's micro-batches in flight: stage s of p holds min(p - s, m) of them at
// once (pipeline_schedule.h), so with one layer per stage stage s's saved activations peak at
// min(p - s, m) times its one-micro-batch peak: stage 0 the most, the last stage's (one in
// flight) not growing with m.
TEST(PipelineMemory, EachStageHoldsItsMicroBatchesInFlight) {
  const int stages = 3;
  std::vector<std::vector<std::int64_t>> peaks;  // [m - 1][stage]: peak saved activations
  for (int m = 1; m <= 4; ++m) {
    Case c;
    c.model = make_model(97, 32, 48, 4, 2, stages);
    c.plan = make_plan(1, 1, 1);
    c.plan.pp = stages;
    c.micro = m;
    c.seq = 16;
    c.batch = 1;
    const Data d = make_data(c, 1);
    std::vector<std::int64_t> stage_peaks(stages);
    comm::run_ranks(stages, [&](comm::Communicator& world) {
      parallel::ParallelGroups groups(world, c.plan);
      parallel::RankModel model(c.model, groups, c.seq, c.recompute, world.tracker(), kSeed);
      std::vector<parallel::LocalBatch> micro;
      for (int i = 0; i < m; ++i) micro.push_back(model.localize(micro_batch(c, d, 0, i)));
      world.tracker().reset_peaks();
      model.accumulate(micro, 1e-3);
      stage_peaks[static_cast<std::size_t>(model.stage())] =
          world.tracker().peak(MemCategory::Activations);
    });
    peaks.push_back(stage_peaks);
  }
  for (int m = 1; m <= 4; ++m) {
    const auto& at = peaks[static_cast<std::size_t>(m - 1)];
    EXPECT_EQ(at[0], std::min(stages, m) * peaks[0][0]) << "stage 0, m = " << m;
    EXPECT_EQ(at[1], std::min(stages - 1, m) * peaks[0][1]) << "stage 1, m = " << m;
    EXPECT_EQ(at[stages - 1], peaks[0][stages - 1]) << "last stage, m = " << m;
    EXPECT_GT(at[0], 0);
  }
}

}  // namespace
}  // namespace origami::parity
