// The optimizer state sharded over dp (ZeRO-1, --shard-optimizer; model/optimizer.h) against
// the unsharded optimizer of the same layout, over the threads transport: three AdamW steps
// with clipping on give bitwise the same losses and parameters (the dp reduce-scatter is the
// all-reduce's first half: same ring, same blocks, same order of additions), and each rank's
// optimizer-state bytes are its 1/dp slice of the unsharded state, exactly, uneven splits
// included.
#include <cstring>
#include <mutex>

#include <gtest/gtest.h>

#include "../sanitizers.h"
#include "origami/comm/communicator.h"
#include "threads_util.h"

namespace origami::parity {
namespace {

// h 40 and V 97: the embedding (3880), the norms (40) and the vocabulary-padded blocks do not
// split evenly over dp 3, so the uneven split of comm::balanced_counts is exercised.
ModelConfig zero1_model() { return make_model(97, 40, 80, 4, 2); }

struct Zero1Run {
  std::vector<double> losses, grad_norms;
  std::vector<float> clips;
  std::vector<std::vector<float>> params;  // gathered full tensors after the steps
  // Per world rank: the tracker's optimizer-state peak, the bytes of the rank's slices of its
  // tensors (8 per element: two fp32 moments, elements by comm::balanced_counts over dp), and
  // the world rank of dp rank 0 of its dp group.
  std::vector<std::int64_t> optimizer_peak, slice_bytes;
  std::vector<int> dp_group;
};

// Three steps of `c` (its micro-batch split over dp as the trainer splits it), sharded or not.
Zero1Run run_zero1(const Case& c, const Data& d, bool shard) {
  Zero1Run out;
  const auto world_size = static_cast<std::size_t>(c.plan.world());
  out.optimizer_peak.assign(world_size, 0);
  out.slice_bytes.assign(world_size, 0);
  out.dp_group.assign(world_size, 0);
  std::mutex m;
  comm::run_ranks(c.plan.world(), [&](comm::Communicator& world) {
    parallel::ParallelGroups groups(world, c.plan);
    MemoryTracker& tracker = world.tracker();
    parallel::RankModel model(c.model, groups, c.seq, c.recompute, tracker, kSeed);
    AdamW opt = parallel::make_rank_optimizer(model, tracker, test_hyper(), shard);
    EXPECT_EQ(opt.sharded(), shard && c.plan.dp > 1);
    const int P = groups.dp().size(), p = groups.dp().rank();
    Zero1Run r;
    for (int s = 1; s <= c.steps; ++s) {
      std::vector<parallel::LocalBatch> micro;
      for (int k = 0; k < c.micro; ++k) {
        TokenBatch b = micro_batch(c, d, s, k);
        const std::int64_t per = c.batch / P;
        b.batch = per;
        b.input_ids += p * per * c.seq;
        b.labels += p * per * c.seq;
        micro.push_back(model.localize(b));
      }
      const parallel::ParallelStepStats st =
          parallel::parallel_train_step(model, opt, micro, test_hyper().lr, c.max_grad_norm);
      r.losses.push_back(st.loss);
      r.grad_norms.push_back(st.grad_norm);
      r.clips.push_back(st.clip_coefficient);
    }
    MemoryTracker scratch("gather");
    for (Tensor& t : model.gather(model.params(), scratch)) r.params.push_back(to_vector(t));
    const std::int64_t peak =
        tracker.stats().peak[static_cast<std::size_t>(MemCategory::OptimizerState)];
    std::int64_t slice = 0;
    for (const NamedTensor& n : named_tensors(model.params()))
      slice += 8 * comm::balanced_counts(n.tensor->numel(), P)[static_cast<std::size_t>(p)];
    std::lock_guard lock(m);
    const auto me = static_cast<std::size_t>(world.rank());
    out.optimizer_peak[me] = peak;
    out.slice_bytes[me] = slice;
    out.dp_group[me] = groups.dp().world_rank_of(0);
    if (world.rank() == 0) {
      out.losses = r.losses;
      out.grad_norms = r.grad_norms;
      out.clips = r.clips;
      out.params = std::move(r.params);
    }
  });
  return out;
}

Case zero1_case(const std::string& name, parallel::ParallelConfig plan) {
  Case c;
  c.name = name;
  c.model = zero1_model();
  c.plan = plan;
  c.batch = plan.dp;  // micro-batch 1 per replica
  c.seq = 24;
  c.micro = 2;  // gradient accumulation: the reduce-scatter follows the last micro-batch only
  c.steps = 3;
  c.max_grad_norm = 0.5;  // clipping engaged (the norm is computed from the slices)
  return c;
}

std::vector<Case> zero1_cases() {
  parallel::ParallelConfig allgather = make_tsp_plan(2, 2);
  allgather.tsp_schedule = parallel::TspSchedule::Allgather;
  std::vector<Case> v = {zero1_case("dp2", make_plan(2, 1, 1)),
                         zero1_case("dp3_uneven", make_plan(3, 1, 1)),
                         zero1_case("dp2xtsp2", make_tsp_plan(2, 2)),
                         // TP-SP: the norms are summed over dp, then over tp (the slice only).
                         zero1_case("dp2xtpsp2", make_plan(2, 2, 1, true))};
#ifndef ORIGAMI_TESTS_SANITIZED  // (the sanitized build runs the four above)
  v.push_back(zero1_case("dp2xtsp2_allgather", allgather));
  v.push_back(zero1_case("dp2xtp2", make_plan(2, 2, 1)));
  v.push_back(zero1_case("dp2xsp2", make_plan(2, 1, 2)));
#endif
  return v;
}

class ShardOptimizer : public ::testing::TestWithParam<Case> {};

TEST_P(ShardOptimizer, ThreeStepsBitwiseEqualTheUnshardedOptimizer) {
  const Case& c = GetParam();
  const Data d = make_data(c, c.steps + 1);
  const Zero1Run whole = run_zero1(c, d, false), sharded = run_zero1(c, d, true);
  ASSERT_EQ(sharded.losses.size(), whole.losses.size());
  bool clipped = false;
  for (std::size_t s = 0; s < whole.losses.size(); ++s) {
    EXPECT_EQ(sharded.losses[s], whole.losses[s]) << c.name << " step " << s + 1;
    // The norm adds the slices' squares in another order than whole tensors' (double).
    EXPECT_NEAR(sharded.grad_norms[s], whole.grad_norms[s], 1e-12 * whole.grad_norms[s])
        << c.name << " step " << s + 1;
    EXPECT_EQ(sharded.clips[s], whole.clips[s]) << c.name << " step " << s + 1;
    clipped = clipped || whole.clips[s] < 1.0f;
  }
  EXPECT_TRUE(clipped) << c.name << ": the case should exercise clipping";
  ASSERT_EQ(sharded.params.size(), whole.params.size());
  for (std::size_t i = 0; i < whole.params.size(); ++i) {
    ASSERT_EQ(sharded.params[i].size(), whole.params[i].size());
    EXPECT_EQ(std::memcmp(sharded.params[i].data(), whole.params[i].data(),
                          whole.params[i].size() * sizeof(float)),
              0)
        << c.name << ": parameter tensor " << i << " differs";
  }
}

// Each rank's optimizer state is its slices' two moments: comm::balanced_counts of every
// tensor over dp, which add up over the dp ranks to the unsharded state exactly.
TEST_P(ShardOptimizer, OptimizerStateBytesAreTheRanksSliceOfTheUnshardedState) {
  Case c = GetParam();
  c.steps = 1;
  const Data d = make_data(c, c.steps + 1);
  const Zero1Run whole = run_zero1(c, d, false), sharded = run_zero1(c, d, true);
  for (std::size_t r = 0; r < sharded.optimizer_peak.size(); ++r) {
    EXPECT_EQ(sharded.optimizer_peak[r], sharded.slice_bytes[r]) << c.name << " rank " << r;
    // Over its dp group the slices add up to the unsharded state exactly.
    std::int64_t group = 0;
    for (std::size_t q = 0; q < sharded.optimizer_peak.size(); ++q)
      if (sharded.dp_group[q] == sharded.dp_group[r]) group += sharded.optimizer_peak[q];
    EXPECT_EQ(group, whole.optimizer_peak[r]) << c.name << " rank " << r;
  }
  if (c.name == "dp3_uneven") {  // the slices really are uneven there
    EXPECT_NE(sharded.optimizer_peak[0], sharded.optimizer_peak[2]);
  }
}

INSTANTIATE_TEST_SUITE_P(Zero1, ShardOptimizer, ::testing::ValuesIn(zero1_cases()), case_name);

// At dp 1 the flag changes nothing: the optimizer is the unsharded one.
TEST(ShardOptimizerNoDp, IsTheUnshardedOptimizerAtDpOne) {
  Case c = zero1_case("tsp2", make_tsp_plan(1, 2));
  c.batch = 1;
  const Data d = make_data(c, c.steps + 1);
  const Zero1Run whole = run_zero1(c, d, false), flagged = run_zero1(c, d, true);
  EXPECT_EQ(flagged.losses, whole.losses);
  EXPECT_EQ(flagged.params, whole.params);
  EXPECT_EQ(flagged.optimizer_peak, whole.optimizer_peak);
}

}  // namespace
}  // namespace origami::parity
