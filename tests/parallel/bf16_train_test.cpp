// Training under --precision bf16 (core/precision.h) against fp32, over the threads transport:
// the same case (h 64, f 128, 4 heads / 2 kv heads, V 97, 2 layers, 2 x 24 tokens, every 5th
// label masked, initialiser 0.02) run by RankModel in both precisions from the same fp32
// initialisation.
//
// Tolerances (the data and the initialisation are fixed: the figures below are reproducible).
// Every linear reads bf16 weights and bf16-rounded activations (native path), K and V are held
// in bf16 (AttentionDims::kv) and the saved activations are kept in bf16 between the forward
// and the backward (model/saved_dtype.h), each rounding within 2^-9 relative,
// ~2^-9/sqrt(3) ~ 1.1e-3 rms, unrelated over a product's K terms, so one product is off by
// ~2e-3 of its norm and a gradient that passes through a few of them (head, W_O, attention,
// the next layer's Q/K/V) by a few 1e-3: held to 1e-2 (measured worst 7.6e-3, a wrong gradient
// is off by ~1). The model's initialiser is Llama's 0.02 here, not the parity suites' 0.15,
// whose sharp softmaxes amplify the logits' rounding: there the worst gradient is 2.3e-2 and
// the loss 2.5e-4 (ORIGAMI_BF16_TEST_INIT=0.15 reruns it so). The loss and the step losses to
// 1e-3 (measured 1.7e-5). Five AdamW steps (lr 2e-3): AdamW's first updates are ~lr x sign(g)
// whatever |g|, so every element whose gradient is smaller than the bf16 noise may step the
// other way; each parameter tensor's distance to the fp32 run is held to 0.2 of the distance
// the fp32 run moved it (measured worst 0.069; a wrong gradient gives ~1 or more).
//
// Every layout in bf16 (dp, tp, tp-sp, sp, tp x sp, dp x tp, TSP at D 2, 3, 4 under either
// schedule, dp x TSP, pipelines) against one device in bf16 (Bf16Parity), on each products'
// path. Every layout rounds the same values at the same points (the weights, K/V, the saved
// activations, and on the native path every product's operands), but a value whose fp32
// reduction order differs between layouts (the attention over zigzag chunks, the sums over
// shards, a product computed per shard) rounds to the other bf16 neighbour near a tie, and
// that ulp, 2^-8, propagates: for an fp32 difference d per value, about sqrt(2^-8 / d) times d.
// Widening (forced; the path of every CPU without bf16 dot products): the products are fp32
// on the exactly widened bf16 weights, so only K/V and the saved activations round: held to
// 5e-4 (measured 0 for pp 2, 1.4e-7 to 4.1e-7 for dp 2, sp 2 and tp 2 x sp 2, 9.2e-6 to
// 1.3e-5 for tp 2, tsp 2 and 3 and their products with dp and pp, 5.5e-5 for sp 4, 1.5e-4 for
// tsp 4, the MLP's gate/up rounding); a layout that read its fp32 master instead, or moved a
// shard that was not rounded, is off by the weights' rounding in every tensor, a few 1e-3.
// After five steps each tensor's distance is held to 0.02 of the distance moved (measured
// 7.0e-4), the step losses to 1e-4. Native (bf16 products on activations rounded to bf16):
// measured 0 to 7.8e-8 for pp 2, dp 2, sp 2 and sp 4, 1.8e-4 for tsp 3, 7.7e-4 to 3.3e-3
// elsewhere, parameters after five steps up to 0.035 of the distance moved (tsp 4): held to
// the bf16-vs-fp32 bounds above (1e-2, the step losses 1e-3, 0.2 of the distance moved), the
// widening path carrying the sharper check.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "origami/comm/run_ranks.h"
#include "origami/core/error.h"
#include "../sanitizers.h"
#include "threads_util.h"
#include "origami/kernels/gemm.h"

namespace origami::parity {
namespace {

// ORIGAMI_BF16_TEST_INIT overrides the initialiser's standard deviation (measurements only).
double init_range() {
  const char* v = std::getenv("ORIGAMI_BF16_TEST_INIT");
  return v != nullptr ? std::atof(v) : 0.02;
}

Case bf16_case(const std::string& precision, int dp, int steps) {
  Case c;
  c.name = precision + "_dp" + std::to_string(dp);
  c.model = make_model(97, 64, 128, 4, 2);
  c.model.initializer_range = init_range();
  c.plan = make_plan(dp, 1, 1);
  c.steps = steps;
  c.precision = precision;
  return c;
}

TEST(Bf16Training, StepGradientsAndFiveStepsFollowFp32) {
  const Data d = make_data(bf16_case("fp32", 1, 5), 6);
  const Result f = run_threads(bf16_case("fp32", 1, 5), d);
  const Result b = run_threads(bf16_case("bf16", 1, 5), d);
  const double loss_diff = relative_difference(b.loss, f.loss);
  EXPECT_LE(loss_diff, 1e-3) << "loss " << b.loss << " vs " << f.loss;
  ASSERT_EQ(b.grads.size(), f.grads.size());
  double worst = 0;
  for (std::size_t i = 0; i < f.grads.size(); ++i) {
    const double r = relative_difference(b.grads[i], f.grads[i]);
    worst = std::max(worst, r);
    EXPECT_LE(r, 1e-2) << "gradient of " << f.names[i];
  }
  // The bf16 products ran: an fp32 run would agree to ~1e-6.
  EXPECT_GT(worst, 1e-4) << "no gradient differs from fp32's beyond its reduction order";
  std::cout << "bf16 vs fp32: loss " << loss_diff << ", worst gradient " << worst << "\n";
  const std::vector<std::vector<float>> p0 = initial_parameters(bf16_case("fp32", 1, 5));
  ASSERT_EQ(b.params.size(), p0.size());
  ASSERT_EQ(f.params.size(), p0.size());
  double worst_step = 0;
  for (std::size_t i = 0; i < p0.size(); ++i) {
    const double moved = relative_difference(f.params[i], p0[i]);  // ||p_f - p0|| / ||p0||
    const double apart = relative_difference(b.params[i], f.params[i]);
    ASSERT_GT(moved, 0) << f.names[i];
    worst_step = std::max(worst_step, apart / moved);
    EXPECT_LE(apart, 0.2 * moved) << "parameter " << f.names[i] << " after five steps";
  }
  for (std::size_t s = 0; s < f.step_losses.size(); ++s)
    EXPECT_LE(relative_difference(b.step_losses[s], f.step_losses[s]), 1e-3) << "step " << s + 1;
  std::cout << "bf16 vs fp32 after five steps: worst parameter distance / distance moved "
            << worst_step << "\n";
}

// Every layout in bf16 against one device in bf16 (the header's dp paragraph holds for all:
// each token's roundings are the same on every layout, the fp32 reductions' order is not).
struct Bf16Layout {
  std::string name;
  ModelConfig model;
  parallel::ParallelConfig plan;
  int micro = 1;
};

std::vector<Bf16Layout> bf16_layouts() {
  // Degree 3 needs heads and kv heads divisible by 3; "kv2" replicates its 2 kv heads over 2
  // ranks at D = 4 (the parity suites' models).
  const ModelConfig gqa = make_model(97, 64, 128, 4, 2), six = make_model(100, 48, 96, 6, 3),
                    kv2 = make_model(97, 64, 96, 8, 2);
  parallel::ParallelConfig allgather = make_tsp_plan(1, 2);
  allgather.tsp_schedule = parallel::TspSchedule::Allgather;
  parallel::ParallelConfig pp2_tsp2 = make_tsp_plan(1, 2);
  pp2_tsp2.pp = 2;
  parallel::ParallelConfig pp2 = make_plan(1, 1, 1);
  pp2.pp = 2;
  std::vector<Bf16Layout> v = {
      {"dp2", gqa, make_plan(2, 1, 1)},
      {"tp2", gqa, make_plan(1, 2, 1)},
      {"tpsp2", gqa, make_plan(1, 2, 1, true)},
      {"sp2", gqa, make_plan(1, 1, 2)},
      {"tsp2", gqa, make_tsp_plan(1, 2)},
      {"tsp3", six, make_tsp_plan(1, 3)},
      {"tsp4_kv_replicated", kv2, make_tsp_plan(1, 4)},
      {"dp2_tsp2", gqa, make_tsp_plan(2, 2)},
      {"tsp2_allgather", gqa, allgather},
      {"pp2_m2", gqa, pp2, 2},
      {"pp2_tsp2_m2", gqa, pp2_tsp2, 2},
  };
#ifndef ORIGAMI_TESTS_SANITIZED  // 4 ranks a run: the sanitizers' build keeps the 2-rank ones
  v.push_back({"tp2_sp2", gqa, make_plan(1, 2, 2)});
  v.push_back({"dp2_tp2", gqa, make_plan(2, 2, 1)});
  // ../shared/TRAPS.md: bf16 partial attention outputs merged across context-parallel steps
  // drift with the degree. Here K/V are gathered whole and out/LSE stay fp32, so sp 4 must sit
  // within sp 2's bounds.
  v.push_back({"sp4", gqa, make_plan(1, 1, 4)});
#endif
  return v;
}

// The products' path: "widening" (forced: W widened exactly, fp32 products on the fp32
// activations) or "native" (bf16 products on activations rounded to bf16; skipped where the
// CPU has no bf16 dot products, where widening is the path every run takes).
using Bf16ParityParam = std::tuple<Bf16Layout, bool>;  // (layout, native)

class Bf16Parity : public ::testing::TestWithParam<Bf16ParityParam> {
 protected:
  void SetUp() override {
    if (std::get<1>(GetParam()) && !kernels::gemm_bf16_native())
      GTEST_SKIP() << "no bf16 dot products here: every bf16 run takes the widening path";
    kernels::force_gemm_bf16_conversion(!std::get<1>(GetParam()));
  }
  void TearDown() override { kernels::force_gemm_bf16_conversion(false); }
};

TEST_P(Bf16Parity, GradientsAndFiveStepsMatchOneDeviceInBf16) {
  const auto& [l, native] = GetParam();
  Case one = bf16_case("bf16", 1, 5);
  one.model = l.model;
  one.model.initializer_range = init_range();
  one.micro = l.micro;
  Case par = one;
  par.name = "bf16_" + l.name + (native ? "_native" : "_widening");
  par.plan = l.plan;
  const Data d = make_data(one, 6);
  const Result single = run_threads(one, d);
  const Result layout = run_threads(par, d);
  // Tolerances: the header. Widening: the gradients to 5e-4 (K/V and the saved activations
  // round), the step losses to 1e-4, each parameter tensor to 0.02 of the distance moved.
  // Native: the bf16-vs-fp32 bounds (1e-2, 1e-3, 0.2), the rounding turning reduction-order
  // differences into bf16 ulps.
  const double grad_tol = native ? 1e-2 : 5e-4, step_tol = native ? 1e-3 : 1e-4,
               param_tol = native ? 0.2 : 0.02;
  EXPECT_LE(relative_difference(layout.loss, single.loss), grad_tol) << par.name;
  ASSERT_EQ(layout.grads.size(), single.grads.size());
  double worst_grad = 0;
  for (std::size_t i = 0; i < single.grads.size(); ++i) {
    ASSERT_EQ(layout.names[i], single.names[i]);
    const double r = relative_difference(layout.grads[i], single.grads[i]);
    worst_grad = std::max(worst_grad, r);
    EXPECT_LE(r, grad_tol) << par.name << ": gradient of " << single.names[i];
  }
  ASSERT_EQ(layout.step_losses.size(), single.step_losses.size());
  for (std::size_t s = 0; s < single.step_losses.size(); ++s)
    EXPECT_LE(relative_difference(layout.step_losses[s], single.step_losses[s]), step_tol)
        << par.name << " step " << s + 1;
  const std::vector<std::vector<float>> p0 = initial_parameters(one);
  ASSERT_EQ(layout.params.size(), single.params.size());
  ASSERT_EQ(single.params.size(), p0.size());
  double worst = 0;
  for (std::size_t i = 0; i < single.params.size(); ++i) {
    const double moved = relative_difference(single.params[i], p0[i]);
    const double apart = relative_difference(layout.params[i], single.params[i]);
    ASSERT_GT(moved, 0) << single.names[i];
    worst = std::max(worst, apart / moved);
    EXPECT_LE(apart, param_tol * moved) << par.name << ": " << single.names[i];
  }
  std::cout << par.name << " vs single: worst gradient " << worst_grad
            << ", after five steps worst parameter distance / distance moved " << worst << "\n";
}

INSTANTIATE_TEST_SUITE_P(Layouts, Bf16Parity,
                         ::testing::Combine(::testing::ValuesIn(bf16_layouts()),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<Bf16ParityParam>& info) {
                           return std::get<0>(info.param).name +
                                  (std::get<1>(info.param) ? "_native" : "_widening");
                         });

// The tracker's categories under bf16: the bf16 compute copy (2 bytes per matrix element) as
// parameters, apart from the fp32 master (4 bytes per element) held as optimizer state with
// AdamW's two moments (8 more), as the planner's Precision::bf16 accounts them.
TEST(Bf16Training, MasterAndComputeCopyAreSeparateCategories) {
  const Case c = bf16_case("bf16", 1, 0);
  comm::run_ranks(1, [&](comm::Communicator& world) {
    parallel::ParallelGroups groups(world, c.plan);
    MemoryTracker& t = world.tracker();
    parallel::RankModel model(c.model, groups, c.seq, Recompute::None, t, kSeed, Precision::bf16());
    std::int64_t all = 0, matrices = 0;
    for (const NamedTensor& p : named_tensors(model.params())) {
      all += p.tensor->numel();
      if (!p.is_norm) matrices += p.tensor->numel();
    }
    EXPECT_EQ(t.current(MemCategory::Parameters), 2 * matrices);
    EXPECT_EQ(t.current(MemCategory::OptimizerState), 4 * all);
    AdamW opt = parallel::make_rank_optimizer(model, t, test_hyper(), false);
    EXPECT_EQ(t.current(MemCategory::OptimizerState), 12 * all);
    EXPECT_EQ(t.current(MemCategory::Gradients), 4 * all);
  });
}

// The saved activations' peak (world rank 0) of one forward + backward of `m` under `p`.
std::int64_t activations_peak(const ModelConfig& m, const parallel::ParallelConfig& p,
                              const Precision& precision) {
  Case c;
  c.model = m;
  c.plan = p;
  c.batch = 2;
  c.seq = 16;
  const Data d = make_data(c, 1);
  std::int64_t peak = 0;
  comm::run_ranks(p.world(), [&](comm::Communicator& world) {
    parallel::ParallelGroups groups(world, p);
    MemoryTracker& t = world.tracker();
    parallel::RankModel model(m, groups, c.seq, Recompute::None, t, kSeed, precision);
    t.reset_peaks();
    const std::int64_t per = c.batch / p.dp, first = groups.dp().rank() * per * c.seq;
    const TokenBatch all = micro_batch(c, d, 0, 0);
    model.run(model.localize({per, c.seq, all.input_ids + first, all.labels + first}), true,
              1e-3);
    if (world.rank() == 0) peak = t.peak(MemCategory::Activations);
  });
  return peak;
}

// The saved activations are kept in bf16 between the forward and the backward on every layout
// (the driver narrows them: model/saved_dtype.h): their peak is over half of fp32's (the norms'
// rstd and attention's LSE stay fp32) and at most half plus one layer's (the layer whose fp32
// tensors are being narrowed when the forward ends). 8 layers, so that the bound is sharp.
TEST(Bf16Training, SavedActivationsTakeHalfTheBytesOnEveryLayout) {
  ModelConfig m = make_model(97, 64, 128, 4, 2);
  m.num_hidden_layers = 8;
  const double L = static_cast<double>(m.num_hidden_layers);
  for (const parallel::ParallelConfig& p :
       {make_plan(1, 1, 1), make_plan(2, 1, 1), make_plan(1, 2, 1), make_plan(1, 1, 2),
        make_plan(1, 2, 1, true), make_tsp_plan(1, 2), make_tsp_plan(2, 2)}) {
    const std::int64_t f = activations_peak(m, p, Precision::fp32()),
                       b = activations_peak(m, p, Precision::bf16());
    const double ratio = double(b) / double(f);
    std::cout << p.describe() << ": saved activations bf16 " << b << " B, fp32 " << f
              << " B, ratio " << ratio << "\n";
    EXPECT_GT(ratio, 0.5) << p.describe();
    EXPECT_LE(ratio, 0.5 + 1.0 / L) << p.describe();
  }
}

// A mixture of experts (its router and experts have no bf16 path) is refused before anything
// is allocated, on one device and under a layout.
TEST(Bf16Training, MixtureOfExpertsRefusedBeforeAllocating) {
  ModelConfig moe = make_model(97, 64, 128, 4, 2);
  moe.num_local_experts = 4;
  moe.num_experts_per_tok = 2;
  for (const parallel::ParallelConfig& p : {make_plan(1, 1, 1), make_tsp_plan(1, 2)}) {
    comm::run_ranks(p.world(), [&](comm::Communicator& world) {
      parallel::ParallelGroups groups(world, p);
      MemoryTracker& t = world.tracker();
      const std::int64_t before = t.stats().peak_total;
      EXPECT_THROW(
          parallel::RankModel(moe, groups, 24, Recompute::None, t, kSeed, Precision::bf16()),
          ConfigError)
          << p.describe();
      EXPECT_EQ(t.stats().peak_total, before) << p.describe();
    });
  }
}

}  // namespace
}  // namespace origami::parity
