// The reduction-group traps of TRAPS.md, each as a test that fails when the trap is sprung,
// instantiated for every registered strategy (parallel/registry.h) the trap applies to: a rank
// whose tokens are all masked (strategies that split the tokens), every label masked (all),
// replicated RMSNorm weights counted once in the gradient norm, a vocabulary not divisible by
// the degree padded and masked, padding rows that stay zero (strategies that shard weights),
// clipping that actually scales (all). A new strategy gets them by registering.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../sanitizers.h"
#include "origami/kernels/threads.h"
#include "origami/parallel/registry.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"
#include "origami/train/rank_step.h"
#include "threads_util.h"

namespace origami::parity {
namespace {

using parallel::ParallelConfig;
using parallel::TokenLayoutKind;

Case make_case(std::string name, ModelConfig m, ParallelConfig p) {
  Case c;
  c.name = std::move(name);
  c.model = m;
  c.plan = p;
  return c;
}

bool all_finite(const Result& r) {
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) return false;
  for (const auto& g : r.grads)
    for (float x : g)
      if (!std::isfinite(x)) return false;
  return true;
}

// One gradient check of `c` (with its masked prefix): finite, and equal to one device's.
void expect_finite_and_equal_to_one_device(const Case& c) {
  const Data d = make_data(c, 1);
  const Result par = run_threads(c, d);
  EXPECT_TRUE(all_finite(par)) << c.name;
  expect_equal(c, par, run_single(c, d));
}

// Strategy `name` at `degree` ranks (its registered degree axis).
class Traps : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { kernels::set_thread_count(1); }
};
class TokenTraps : public Traps {};
class WeightTraps : public Traps {};

TEST_P(TokenTraps, RankWithEveryTokenMaskedGetsTheOthersMean) {
  // Contiguous over 4 ranks and 24 positions: rank 0 holds positions 0..5, all masked; it
  // still takes part in every collective and receives the others' contributions.
  Case c = make_case(GetParam() + "4_rank0_masked", make_model(100, 64, 96, 4, 4),
                     strategy_at(GetParam(), 4, TokenLayoutKind::Contiguous));
  c.masked_prefix = 6;
  c.steps = 2;
  const Data d = make_data(c, c.steps + 1);
  const Result par = run_threads(c, d);
  EXPECT_TRUE(all_finite(par));
  EXPECT_GT(par.loss, 0.0);
  expect_equal(c, par, run_single(c, d));

  // With dp outside: the first dp replica's token ranks hold only masked labels.
  ParallelConfig p = strategy_at(GetParam(), 2, TokenLayoutKind::Contiguous);
  p.dp = 2;
  Case dp = make_case("dp2x" + GetParam() + "2_masked", make_model(100, 64, 96, 4, 4), p);
  dp.masked_prefix = 12;
  expect_finite_and_equal_to_one_device(dp);
}

// TP-SP's regions inside, dp outside, sp beside: rank pairs whose rows are all masked.
TEST(TrapsOnAMesh, RankWithEveryTokenMaskedGetsTheOthersMean) {
  kernels::set_thread_count(1);
  Case dp = make_case("dp2xtpsp2xsp2_masked", make_model(100, 64, 96, 4, 4),
                      make_plan(2, 2, 2, true, TokenLayoutKind::Contiguous));
  dp.masked_prefix = 12;
  expect_finite_and_equal_to_one_device(dp);
}

TEST_P(Traps, EveryLabelMaskedGivesZeroLossAndZeroGradients) {
  Case c = make_case(GetParam() + "2_all_masked", make_model(100, 64, 96, 4, 4),
                     strategy_at(GetParam(), 2));
  if (c.plan.dp > 1) c.batch = 2 * c.plan.dp;
  c.masked_prefix = c.seq;
  const Result par = run_threads(c, make_data(c, 1));
  EXPECT_TRUE(all_finite(par));
  EXPECT_EQ(par.loss, 0.0);
  EXPECT_EQ(par.grad_norm, 0.0);
}

TEST_P(Traps, ClippingActuallyScalesTheGradients) {
  Case c =
      make_case(GetParam() + "2_clip", make_model(97, 64, 96, 4, 2), strategy_at(GetParam(), 2));
  c.steps = 3;
  c.max_grad_norm = 0.05;  // far below the gradient norm: every step clips
  const Data d = make_data(c, c.steps + 1);
  const Result par = run_threads(c, d), ref = run_single(c, d);
  for (float coef : par.clip_coefficients) EXPECT_LT(coef, 0.5f);
  for (std::size_t s = 0; s < ref.clip_coefficients.size(); ++s)
    EXPECT_NEAR(par.clip_coefficients[s], ref.clip_coefficients[s],
                1e-5 * ref.clip_coefficients[s]);
  expect_equal(c, par, ref);
  // AdamW is nearly invariant to a constant gradient scale, so the parameters alone would
  // barely show a clip that was computed but never applied: check the gradients themselves.
  // After the step they hold the clipped values: their global norm is max_grad_norm.
  comm::run_ranks(c.plan.world(), [&](comm::Communicator& world) {
    parallel::ParallelGroups groups(world, c.plan);
    parallel::RankModel model(c.model, groups, c.seq, Recompute::None, world.tracker(), kSeed);
    AdamW opt(model.params(), world.tracker(), test_hyper());
    const std::int64_t per = c.batch / c.plan.dp, first = groups.dp().rank() * per * c.seq;
    const TokenBatch all = micro_batch(c, d, 1, 0);
    std::vector<parallel::LocalBatch> micro{
        model.localize({per, c.seq, all.input_ids + first, all.labels + first})};
    const parallel::ParallelStepStats st =
        parallel::parallel_train_step(model, opt, micro, 1e-3f, 0.05);
    EXPECT_GT(st.grad_norm, 0.5);
    EXPECT_NEAR(model.grad_norm(), 0.05, 0.05 * 1e-5);
  });
}

TEST_P(WeightTraps, ReplicatedNormWeightsCountedOnceInTheGradientNorm) {
  // The RMSNorm gradients are identical on every rank of plain TP, summed over the tp axis
  // under TP-SP and over the tsp axis under TSP: counted 4 times (or not summed), the norm
  // would differ from one device's.
  Case c =
      make_case(GetParam() + "4_norm", make_model(100, 64, 96, 4, 4), strategy_at(GetParam(), 4));
  c.batch = 1;
  const Data d = make_data(c, 1);
  const Result par = run_threads(c, d), ref = run_single(c, d);
  EXPECT_LE(relative_difference(par.grad_norm, ref.grad_norm), 1e-6) << c.name;
  // The norm weights' share is large enough that counting them 4x would be visible.
  double norm_sq = 0;
  for (std::size_t i = 0; i < ref.names.size(); ++i)
    if (ref.names[i].find("norm") != std::string::npos)
      for (float x : ref.grads[i]) norm_sq += double(x) * x;
  const double wrong = std::sqrt(ref.grad_norm * ref.grad_norm + 3 * norm_sq);
  EXPECT_GT(relative_difference(wrong, ref.grad_norm), 1e-4) << "the test would not see the trap";
  // The specs state it: sharded tensors' squares summed over their weight axis, norms over
  // nothing.
  comm::run_ranks(4, [&](comm::Communicator& world) {
    parallel::ParallelGroups groups(world, c.plan);
    const parallel::Strategy s = parallel::make_strategy(c.model, groups);
    const std::string weight_axis = c.plan.is_tsp() ? "tsp" : "tp";
    for (const parallel::ShardSpec& spec : s.specs) {
      if (spec.is_norm) {
        EXPECT_TRUE(spec.norm_sum_axes.empty()) << spec.name;
        // Under TSP each rank normed its own tokens: the norms' gradients summed over tsp.
        if (c.plan.is_tsp()) {
          EXPECT_EQ(spec.grad_sum_axes, std::vector<std::string>{"tsp"}) << spec.name;
        }
      } else {
        EXPECT_EQ(spec.norm_sum_axes, std::vector<std::string>{weight_axis}) << spec.name;
        // TSP's shards are reduced to their owner inside the blocks: nothing after.
        if (c.plan.is_tsp()) {
          EXPECT_TRUE(spec.grad_sum_axes.empty()) << spec.name;
        }
      }
    }
  });
}

TEST_P(WeightTraps, VocabularyNotDivisibleByTheDegreeIsPaddedAndMasked) {
  for (int degree : {2, 3, 4}) {
    // 97 is prime: every degree pads (to 98, 99, 100 rows).
    const ModelConfig m = degree == 3 ? make_model(97, 48, 96, 6, 3) : make_model(97, 64, 96, 4, 4);
    Case c = make_case(fmt::format("{}{}_vocab97", GetParam(), degree), m,
                       strategy_at(GetParam(), degree));
    c.steps = 2;
    const Data d = make_data(c, c.steps + 1);
    const Result par = run_threads(c, d);
    ASSERT_EQ(par.grads[0].size(), static_cast<std::size_t>(97 * m.hidden_size))
        << "gathered embedding without the padding rows";
    expect_equal(c, par, run_single(c, d));
  }
}

TEST_P(WeightTraps, PaddingRowsStayZeroThroughTraining) {
  const ModelConfig m = make_model(97, 64, 96, 4, 4);
  Case c = make_case(GetParam() + "4_padding", m, strategy_at(GetParam(), 4));
  const Data d = make_data(c, 3);
  comm::run_ranks(4, [&](comm::Communicator& world) {
    parallel::ParallelGroups groups(world, c.plan);
    parallel::RankModel model(m, groups, c.seq, Recompute::None, world.tracker(), kSeed);
    AdamW opt(model.params(), world.tracker(), test_hyper());
    for (int s = 0; s < 3; ++s) {
      std::vector<parallel::LocalBatch> micro{model.localize(micro_batch(c, d, s, 0))};
      parallel::parallel_train_step(model, opt, micro, 1e-2f, 1.0);
    }
    if (world.rank() == 3) {  // rows 75..99 of which 97..99 are padding
      for (Tensor* t : {&model.params().embed, &model.params().lm_head, &model.grads().embed,
                        &model.grads().lm_head})
        for (std::int64_t i = 22 * 64; i < t->numel(); ++i) ASSERT_EQ(t->f32()[i], 0.0f);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Strategies, Traps, ::testing::ValuesIn(strategies_where(any_strategy)),
                         strategy_param_name);
INSTANTIATE_TEST_SUITE_P(Strategies, TokenTraps,
                         ::testing::ValuesIn(strategies_where(splits_tokens)), strategy_param_name);
INSTANTIATE_TEST_SUITE_P(Strategies, WeightTraps,
                         ::testing::ValuesIn(strategies_where(shards_weights)),
                         strategy_param_name);

// TSP's own: the LM head's vocabulary ring moves each block in chunks of at most
// kHeadRingChunkFloats (tsp_head.cpp). V 33001 at h 64: blocks of 16501 (D = 2: 16384 + 117
// rows, the second chunk padded past V) and 11001 rows (D = 3: one chunk) -- the chunk
// boundaries, the padding inside the last chunk and the running softmax across chunks all
// equal the single device.
TEST(TspTraps, VocabularyRingInChunksEqualsOneDevice) {
  kernels::set_thread_count(1);
  ASSERT_EQ(parallel::kHeadRingChunkFloats / 64, 16384);
  // Under the sanitizers D = 2 only: it already has both chunk boundaries and the padding.
#ifdef ORIGAMI_TESTS_SANITIZED
  const std::vector<int> degrees{2};
#else
  const std::vector<int> degrees{2, 3};
#endif
  for (int dg : degrees) {
    const ModelConfig m =
        dg == 3 ? make_model(33001, 48, 96, 6, 3, 1) : make_model(33001, 64, 96, 4, 4, 1);
    Case c = make_case("tsp_vocab_chunks", m, make_tsp_plan(1, dg));
    c.steps = 2;
    const Data d = make_data(c, c.steps + 1);
    expect_equal(c, run_threads(c, d), run_single(c, d));
  }
}

}  // namespace
}  // namespace origami::parity
