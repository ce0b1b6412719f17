// Pipeline stages against one device (the parity harness, harness.h): the loss, every gathered
// gradient (per tensor ||a-b||/||b|| <= 1e-5) and, for the *_steps cases, five AdamW steps with
// clipping (losses and parameters <= 1e-4), on the threads transport. 1F1B at pp = 2, 3 and 4
// over a 5-layer model with uneven splits (4,1; 1,3,1; 1,1,3; 1,1,1,2; the balanced 1,2,1,1),
// fewer micro-batches than stages (m < p), as many (m = p) and more (m > p), composed with
// tsp 2 (both of TSP's schedules, at pp 2, 3 and 4), dp 2 (pp 2, 3, 4) and the baselines' tp 2
// (with and without sequence-parallel regions) and sp 2; and interleaved 1F1B (--pp-virtual 2)
// at pp 2, 3 and 4, m = p and m > p, composed with tsp 2 and dp 2 (pp 2, 3, 4), tp 2, sp 2 and
// TP-SP. A mixture of experts (moe_*: the degree-1 mesh, TSP's weight ring and expert
// schedule, tp 2, dp 2, dp 2 x tsp 2, interleaved, pp 3 with m < p, a capacity), its expert
// load equal to one device's exactly. Under the sanitizers a reduced set. And the tracker's
// view of each stage's micro-batches (chunk passes) in flight.
#include <gtest/gtest.h>

#include <algorithm>

#include "origami/kernels/threads.h"
#include "origami/parallel/pipeline_schedule.h"
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

// Interleaved 1F1B: `virtual_stages` chunks a rank (`layers`: per chunk, or the balanced split).
ParallelConfig interleaved(ParallelConfig p, int pp, int virtual_stages,
                           std::vector<std::int64_t> layers = {}) {
  p = staged(p, pp, std::move(layers));
  p.pp_virtual = virtual_stages;
  return p;
}

std::vector<Case> pipeline_cases() {
  std::vector<Case> v;
  auto add = [&](std::string name, ParallelConfig p, int micro, std::int64_t B = 1,
                 Recompute r = Recompute::None, int steps = 0,
                 ModelConfig model = pipeline_model()) {
    Case c;
    c.name = std::move(name);
    c.model = std::move(model);
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
  // Interleaved 1F1B: pp 2 x 2 chunks over the 5 layers (balanced 1,2,1,1, or given), pp 3 x
  // 2 chunks over 6 (one layer a chunk); m = p and m > p (a multiple of p).
  const ModelConfig six = make_model(97, 32, 48, 4, 2, 6);
  add("pp2_v2_tsp2_m4_steps", interleaved(make_tsp_plan(1, 2), 2, 2, {1, 1, 2, 1}), 4, 2,
      Recompute::None, 5);
  add("pp3_v2_m3_steps", interleaved(one, 3, 2), 3, 1, Recompute::Mlp, 5, six);
  // A mixture of experts (docs/moe.md, "Pipeline stages"): each stage routes and balances its
  // own layers, the aux loss and the expert load summed over the stages (one device's load
  // exactly); several micro-batches in flight, each backward reading its own forward's
  // balance. E 4, top-2 unless named.
  const ModelConfig moe = with_experts(pipeline_model(), 4, 2);
  add("moe_pp2_3x2_m3_steps", staged(one, 2, {3, 2}), 3, 1, Recompute::None, 5, moe);  // m > p
  add("moe_pp2_tsp2_m3_steps", staged(make_tsp_plan(1, 2), 2, {2, 3}), 3, 2, Recompute::None, 5,
      moe);
  add("moe_pp3_1x3x1_m2_mlp", staged(one, 3, {1, 3, 1}), 2, 1, Recompute::Mlp, 0, moe);  // m < p
#ifndef ORIGAMI_TESTS_SANITIZED
  ParallelConfig expert_schedule = make_tsp_plan(1, 2);
  expert_schedule.moe_schedule = parallel::MoeSchedule::Expert;
  add("moe_pp2_tsp2_expert_m3_full", staged(expert_schedule, 2, {3, 2}), 3, 2, Recompute::Full, 0,
      moe);
  add("moe_pp2_tsp2_expert_m4_steps", staged(expert_schedule, 2), 4, 2, Recompute::None, 5, moe);
  add("moe_pp2_tp2_m3_steps", staged(make_plan(1, 2, 1), 2, {2, 3}), 3, 2, Recompute::None, 5,
      moe);
  add("moe_pp2_dp2_m2_steps", staged(make_plan(2, 1, 1), 2, {3, 2}), 2, 2, Recompute::None, 5,
      moe);
  add("moe_pp2_v2_m4_steps", interleaved(one, 2, 2), 4, 1, Recompute::None, 5, moe);
  add("moe_pp2_v2_tsp2_m2_full", interleaved(make_tsp_plan(1, 2), 2, 2, {1, 1, 2, 1}), 2, 2,
      Recompute::Full, 0, moe);
  add("moe_pp3_tp2_capacity_m2", staged(make_plan(1, 2, 1), 3, {2, 1, 2}), 2, 2, Recompute::None,
      0, with_capacity(with_experts(pipeline_model(), 4, 2), 0.75));
  add("moe_pp2_dp2_tsp2_e5_top1_m3", staged(make_tsp_plan(2, 2), 2), 3, 2, Recompute::None, 0,
      with_experts(pipeline_model(), 5, 1));
  add("pp3_tsp2_m2_full", staged(make_tsp_plan(1, 2), 3, {2, 1, 2}), 2, 2, Recompute::Full);
  add("pp4_dp2_m5", staged(make_plan(2, 1, 1), 4), 5, 2);
  ParallelConfig allgather = make_tsp_plan(1, 2);
  allgather.tsp_schedule = parallel::TspSchedule::Allgather;
  add("pp2_tsp2_allgather_m3", staged(allgather, 2, {1, 4}), 3, 2);
  add("pp2_dp2_tsp2_m3", staged(make_tsp_plan(2, 2), 2), 3, 2);
  add("pp2_tp2_m2", staged(make_plan(1, 2, 1), 2, {2, 3}), 2, 2);
  add("pp2_sp2_m3", staged(make_plan(1, 1, 2), 2, {3, 2}), 3, 1);
  add("pp2_tpsp2_m2", staged(make_plan(1, 2, 1, true), 2, {2, 3}), 2, 2);  // sharded stream rows
  add("pp2_v2_m2_steps", interleaved(one, 2, 2), 2, 1, Recompute::None, 5);
  add("pp2_v2_dp2_m2_full", interleaved(make_plan(2, 1, 1), 2, 2), 2, 2, Recompute::Full);
  add("pp3_v2_dp2_m6_steps", interleaved(make_plan(2, 1, 1), 3, 2), 6, 2, Recompute::None, 5, six);
  add("pp3_v2_tsp2_m6", interleaved(make_tsp_plan(1, 2), 3, 2), 6, 2, Recompute::None, 0, six);
  add("pp2_v2_dp2_tsp2_m4", interleaved(make_tsp_plan(2, 2), 2, 2, {2, 1, 1, 1}), 4, 2);
  // pp 4 x 2 chunks over 8 layers (one a chunk; the last rank's chunk 3 feeds rank 0's chunk 4),
  // m = p, five steps; and the baselines' tp 2 under interleaving.
  const ModelConfig eight = make_model(97, 32, 48, 4, 2, 8);
  add("pp4_v2_m4_steps", interleaved(one, 4, 2), 4, 1, Recompute::None, 5, eight);
  add("pp2_v2_tp2_m2", interleaved(make_plan(1, 2, 1), 2, 2), 2, 2);
  // The rest of the matrix the issue names: 1F1B at pp 3 under dp 2 and at pp 4 under tsp 2
  // (uneven, m > p), pp 4 with m < p; interleaved at pp 4 under dp 2 and tsp 2 (over 9 layers:
  // uneven chunks, m > p) and under the baselines' sp 2 and TP-SP regions.
  add("pp3_dp2_1x1x3_m4_steps", staged(make_plan(2, 1, 1), 3, {1, 1, 3}), 4, 2, Recompute::None,
      5);
  add("pp4_tsp2_m5_steps", staged(make_tsp_plan(1, 2), 4, {1, 1, 2, 1}), 5, 2, Recompute::None,
      5);
  add("pp4_1x1x1x2_m2", staged(one, 4, {1, 1, 1, 2}), 2, 1, Recompute::Mlp);
  add("pp4_v2_dp2_m4_steps", interleaved(make_plan(2, 1, 1), 4, 2), 4, 2, Recompute::None, 5,
      eight);
  const ModelConfig nine = make_model(97, 32, 48, 4, 2, 9);
  add("pp4_v2_tsp2_9layers_m8", interleaved(make_tsp_plan(1, 2), 4, 2), 8, 2, Recompute::None, 0,
      nine);
  add("pp2_v2_sp2_m2", interleaved(make_plan(1, 1, 2), 2, 2), 2, 1);
  add("pp2_v2_tpsp2_m4_steps", interleaved(make_plan(1, 2, 1, true), 2, 2), 4, 2,
      Recompute::None, 5);
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

// Every stage's peak saved activations over one step of m micro-batches (plan.pp ranks, each
// its pp rank's tracker), the micro-batches of one sequence of 16 tokens.
std::vector<std::int64_t> stage_activation_peaks(const ModelConfig& model,
                                                 const ParallelConfig& plan, int m) {
  Case c;
  c.model = model;
  c.plan = plan;
  c.micro = m;
  c.seq = 16;
  c.batch = 1;
  const Data d = make_data(c, 1);
  std::vector<std::int64_t> peaks(static_cast<std::size_t>(plan.pp));
  comm::run_ranks(plan.world(), [&](comm::Communicator& world) {
    parallel::ParallelGroups groups(world, c.plan);
    parallel::RankModel rank(c.model, groups, c.seq, c.recompute, world.tracker(), kSeed);
    std::vector<parallel::LocalBatch> micro;
    for (int i = 0; i < m; ++i) micro.push_back(rank.localize(micro_batch(c, d, 0, i)));
    world.tracker().reset_peaks();
    rank.accumulate(micro, 1e-3);
    peaks[static_cast<std::size_t>(rank.stage())] = world.tracker().peak(MemCategory::Activations);
  });
  return peaks;
}

// The tracker sees 1F1B's micro-batches in flight: stage s of p holds min(p - s, m) of them at
// once (pipeline_schedule.h), so with one layer per stage stage s's saved activations peak at
// min(p - s, m) times its one-micro-batch peak: stage 0 the most, the last stage's (one in
// flight) not growing with m.
TEST(PipelineMemory, EachStageHoldsItsMicroBatchesInFlight) {
  const int stages = 3;
  const ModelConfig model = make_model(97, 32, 48, 4, 2, stages);
  ParallelConfig plan = make_plan(1, 1, 1);
  plan.pp = stages;
  std::vector<std::vector<std::int64_t>> peaks;  // [m - 1][stage]: peak saved activations
  for (int m = 1; m <= 4; ++m) peaks.push_back(stage_activation_peaks(model, plan, m));
  for (int m = 1; m <= 4; ++m) {
    const auto& at = peaks[static_cast<std::size_t>(m - 1)];
    EXPECT_EQ(at[0], std::min(stages, m) * peaks[0][0]) << "stage 0, m = " << m;
    EXPECT_EQ(at[1], std::min(stages - 1, m) * peaks[0][1]) << "stage 1, m = " << m;
    EXPECT_EQ(at[stages - 1], peaks[0][stages - 1]) << "last stage, m = " << m;
    EXPECT_GT(at[0], 0);
  }
}

// Under interleaving a rank holds pipeline_in_flight chunk passes at once (warm-up + 1): with
// one layer a chunk (pp 2 x 2 chunks over 4 layers) rank 0's peak is that many one-layer
// passes; the last rank's is one fewer plus one pass of its head chunk (the head's forward is
// followed at once by its backward, so only one of those is ever held). The one-pass figures
// from 1F1B over 4 stages of one layer at m = 1: stage 1 (a layer alone) and stage 3 (a layer
// and the final norm).
TEST(PipelineMemory, InterleavedRanksHoldTheirChunkPassesInFlight) {
  const ModelConfig model = make_model(97, 32, 48, 4, 2, 4);
  ParallelConfig plain = make_plan(1, 1, 1);
  plain.pp = 4;
  const std::vector<std::int64_t> one_pass = stage_activation_peaks(model, plain, 1);
  const std::int64_t layer = one_pass[1], head_chunk = one_pass[3];
  ASSERT_GT(layer, 0);
  ParallelConfig plan = plain;
  plan.pp = 2;
  plan.pp_virtual = 2;
  for (const int m : {2, 4, 6}) {
    const std::vector<std::int64_t> at = stage_activation_peaks(model, plan, m);
    const int first = parallel::pipeline_in_flight(2, 2, 0, m);
    const int last = parallel::pipeline_in_flight(2, 2, 1, m);
    EXPECT_EQ(at[0], first * layer) << "rank 0, m = " << m << ", " << first << " in flight";
    EXPECT_EQ(at[1], (last - 1) * layer + head_chunk) << "rank 1, m = " << m;
  }
  EXPECT_EQ(parallel::pipeline_in_flight(2, 2, 0, 2), 4);  // every pass of m = p at once
  EXPECT_EQ(parallel::pipeline_in_flight(2, 2, 0, 6), 5);
  EXPECT_EQ(parallel::pipeline_in_flight(2, 2, 1, 6), 3);
}

}  // namespace
}  // namespace origami::parity
