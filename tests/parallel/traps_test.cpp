// The reduction-group traps of TRAPS.md, each as a test that fails when the trap is sprung:
// a rank whose tokens are all masked, replicated RMSNorm weights counted once in the gradient
// norm, clipping that actually scales, a vocabulary not divisible by the degree.
#include <gtest/gtest.h>

#include <cmath>

#include "origami/kernels/threads.h"
#include "threads_util.h"

namespace origami::parity {
namespace {

using parallel::TokenLayoutKind;

class Traps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { kernels::set_thread_count(1); }
};

Case make_case(std::string name, ModelConfig m, parallel::ParallelConfig p) {
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

TEST_F(Traps, RankWithEveryTokenMaskedGetsTheOthersMean) {
  // Contiguous sp=4 over 24 positions: rank 0 holds positions 0..5, all masked.
  Case c = make_case("sp4_rank0_masked", make_model(100, 64, 96, 4, 4),
                     make_plan(1, 1, 4, false, TokenLayoutKind::Contiguous));
  c.masked_prefix = 6;
  c.steps = 2;
  const Data d = make_data(c, c.steps + 1);
  const Result par = run_threads(c, d);
  EXPECT_TRUE(all_finite(par));
  EXPECT_GT(par.loss, 0.0);
  expect_equal(c, par, run_single(c, d));

  // Also with dp outside and TP-SP inside: rank pairs whose rows are all masked.
  Case dp = make_case("dp2xtpsp2xsp2_masked", make_model(100, 64, 96, 4, 4),
                      make_plan(2, 2, 2, true, TokenLayoutKind::Contiguous));
  dp.masked_prefix = 12;
  const Data dd = make_data(dp, 1);
  const Result pd = run_threads(dp, dd);
  EXPECT_TRUE(all_finite(pd));
  expect_equal(dp, pd, run_single(dp, dd));
}

TEST_F(Traps, EveryLabelMaskedGivesZeroLossAndZeroGradients) {
  Case c = make_case("sp2_all_masked", make_model(100, 64, 96, 4, 4), make_plan(1, 1, 2));
  c.masked_prefix = c.seq;
  const Result par = run_threads(c, make_data(c, 1));
  EXPECT_TRUE(all_finite(par));
  EXPECT_EQ(par.loss, 0.0);
  EXPECT_EQ(par.grad_norm, 0.0);
}

TEST_F(Traps, ReplicatedNormWeightsCountedOnceInTheGradientNorm) {
  // Under TP the RMSNorm gradients are identical on every tp rank and under TP-SP they are
  // summed over tp: counted T times (or not summed), the norm would differ from one device's.
  for (bool seqpar : {false, true}) {
    Case c = make_case(seqpar ? "tpsp4_norm" : "tp4_norm", make_model(100, 64, 96, 4, 4),
                       make_plan(1, 4, 1, seqpar));
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
  }
}

TEST_F(Traps, ClippingActuallyScalesTheGradients) {
  Case c = make_case("tp2xsp2_clip", make_model(97, 64, 96, 4, 2), make_plan(1, 2, 2));
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
  comm::run_ranks(4, [&](comm::Communicator& world) {
    parallel::ParallelGroups groups(world, c.plan);
    parallel::RankModel model(c.model, groups, c.seq, Recompute::None, world.tracker(), kSeed);
    AdamW opt(model.params(), world.tracker(), test_hyper());
    std::vector<parallel::LocalBatch> micro{model.localize(micro_batch(c, d, 1, 0))};
    const parallel::ParallelStepStats st =
        parallel::parallel_train_step(model, opt, micro, 1e-3f, 0.05);
    EXPECT_GT(st.grad_norm, 0.5);
    EXPECT_NEAR(model.grad_norm(), 0.05, 0.05 * 1e-5);
  });
}

TEST_F(Traps, VocabularyNotDivisibleByTheDegreeIsPaddedAndMasked) {
  for (int tp : {2, 3, 4}) {
    // 97 is prime: every degree pads (to 98, 99, 100 rows).
    const ModelConfig m = tp == 3 ? make_model(97, 48, 96, 6, 3) : make_model(97, 64, 96, 4, 4);
    Case c = make_case(fmt::format("tp{}_vocab97", tp), m, make_plan(1, tp, 1, tp == 4));
    c.steps = 2;
    const Data d = make_data(c, c.steps + 1);
    expect_equal(c, run_threads(c, d), run_single(c, d));
  }
}

TEST_F(Traps, PaddingRowsStayZeroThroughTraining) {
  const ModelConfig m = make_model(97, 64, 96, 4, 4);
  Case c = make_case("tp4_padding", m, make_plan(1, 4, 1));
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

}  // namespace
}  // namespace origami::parity
