// The mixture-of-experts MLP's rules that the PyTorch oracle (model_oracle_test) cannot see
// from outside: the tie-break, the capacity's priority order, the routing forced by the
// router weights, the recompute policies, and the refusal under the parallel layouts.
#include "origami/model/moe.h"

#include <cmath>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "origami/kernels/cross_entropy.h"
#include "origami/model/llama.h"
#include "origami/parallel/registry.h"
#include "tiny_model.h"

namespace origami {
namespace {

using model_test::relative_difference;

ModelConfig tiny_moe(std::int64_t top_k) {
  ModelConfig c = model_preset("tiny-moe");
  c.max_position_embeddings = 64;
  c.num_experts_per_tok = top_k;
  c.router_aux_loss_coef = 0.05;
  return c;
}

struct MoeTokens {
  std::vector<std::int32_t> ids, labels;
};
MoeTokens moe_tokens(std::int64_t n, std::int64_t vocab, unsigned seed) {
  std::mt19937 gen(seed);
  MoeTokens t;
  for (std::int64_t i = 0; i < n; ++i) {
    t.ids.push_back(static_cast<std::int32_t>(gen() % vocab));
    t.labels.push_back(i % 6 == 0 ? kernels::kIgnoreLabel
                                  : static_cast<std::int32_t>(gen() % vocab));
  }
  return t;
}

TEST(MoeRouting, TiesGoToTheLowerExpertAndWeightsRenormaliseOverTheChosen) {
  const MoeDims d{.rows = 3, .hidden = 1, .ffn = 1, .experts = 4, .top_k = 2};
  const float logits[] = {1, 1, 0, 1,                           // a three-way tie: 0, 1
                          0, 2, 2, -1,                          // 1 and 2 tie: 1 first
                          std::log(3.0f), 0, -5, std::log(1.0f / 3)};
  const MoeRouting r = route_tokens(d, logits);
  EXPECT_EQ(r.expert, (std::vector<std::int32_t>{0, 1, 1, 2, 0, 1}));
  EXPECT_FLOAT_EQ(r.weight[0], 0.5f);
  EXPECT_FLOAT_EQ(r.weight[1], 0.5f);
  EXPECT_FLOAT_EQ(r.weight[4], 0.75f);  // 3 / (3 + 1): the unchosen experts do not count
  EXPECT_FLOAT_EQ(r.weight[5], 0.25f);
  EXPECT_EQ(r.dropped, 0);
  EXPECT_EQ(r.chosen, (std::vector<std::int64_t>{2, 3, 1, 0}));
  EXPECT_EQ(r.offset, (std::vector<std::int64_t>{0, 2, 5, 6, 6}));  // expert 3: no token
}

TEST(MoeRouting, CapacityServesEveryFirstChoiceBeforeAnySecondInTokenOrder) {
  // C = ceil(0.5 * 4 tokens * 2 / 4 experts) = 1. Tokens 0-2 rank experts 0 then 1; token 3
  // ranks 1 then 0. First choices in token order: 0 takes expert 0, 1 and 2 are dropped, 3
  // takes expert 1; every second choice is then dropped.
  const MoeDims d{.rows = 4, .hidden = 1, .ffn = 1, .experts = 4, .top_k = 2,
                  .capacity_factor = 0.5};
  const float logits[] = {3, 2, 0, 0, 3, 2, 0, 0, 3, 2, 0, 0, 2, 3, 0, 0};
  const MoeRouting r = route_tokens(d, logits);
  EXPECT_EQ(r.capacity, 1);
  EXPECT_EQ(r.dropped, 6);
  EXPECT_EQ(r.kept, (std::vector<std::uint8_t>{1, 0, 0, 0, 0, 0, 1, 0}));
  EXPECT_EQ(r.slot, (std::vector<std::int64_t>{0, 6}));
  EXPECT_EQ(r.chosen, (std::vector<std::int64_t>{4, 4, 0, 0}));  // f counts drops too
}

// A zero router makes every logit equal, so by the tie rule every token picks experts 0..k-1:
// with k = 1 the layer is exactly a dense MLP holding expert 0's weights (routing weight 1),
// the other experts get exactly zero gradient, and the balance term is E * (1 * 1/E) = 1.
TEST(MoeModel, ARouterThatForcesOneExpertIsTheDenseModelOfThatExpert) {
  const ModelConfig moe_config = tiny_moe(1);
  ModelConfig dense_config = moe_config;
  dense_config.num_local_experts = 0;
  MemoryTracker tm, td;
  LlamaModel moe(moe_config, tm, 3), dense(dense_config, td, 3);
  for (std::size_t l = 0; l < moe.params().layers.size(); ++l) {
    LayerTensors& M = moe.params().layers[l];
    LayerTensors& D = dense.params().layers[l];
    M.router.zero();
    D.w_gate.copy_from(M.experts[0].w_gate);
    D.w_up.copy_from(M.experts[0].w_up);
    D.w_down.copy_from(M.experts[0].w_down);
  }
  // Attention, norms, embedding and head: the same values by name (the initialisation is
  // keyed by name already; copied so that the test does not depend on it).
  for (NamedTensor& m : named_tensors(moe.params()))
    for (NamedTensor& d : named_tensors(dense.params()))
      if (m.name == d.name) d.tensor->copy_from(*m.tensor);
  const std::int64_t B = 2, S = 16;
  const MoeTokens t = moe_tokens(B * S, moe_config.vocab_size, 7);
  const TokenBatch batch{B, S, t.ids.data(), t.labels.data()};
  const double scale = 1.0 / static_cast<double>(count_unmasked(batch));
  const LossResult lm = moe.forward_backward(batch, scale);
  const LossResult ld = dense.forward_backward(batch, scale);
  EXPECT_NEAR(lm.mean(), ld.mean(), 1e-6 * ld.mean());
  EXPECT_NEAR(lm.aux, moe_config.router_aux_loss_coef, 1e-12);
  for (std::size_t l = 0; l < moe.grads().layers.size(); ++l) {
    const LayerTensors& G = moe.grads().layers[l];
    const LayerTensors& H = dense.grads().layers[l];
    EXPECT_LE(relative_difference(G.experts[0].w_gate, H.w_gate), 1e-5);
    EXPECT_LE(relative_difference(G.experts[0].w_down, H.w_down), 1e-5);
    EXPECT_LE(relative_difference(G.wq, H.wq), 1e-5);
    for (std::size_t e = 1; e < G.experts.size(); ++e)
      for (const Tensor* g : {&G.experts[e].w_gate, &G.experts[e].w_up, &G.experts[e].w_down})
        for (float x : g->span()) ASSERT_EQ(x, 0.0f) << "expert " << e << " got no token";
    double router = 0;  // the router still learns (softmax and the balance term)
    for (float x : G.router.span()) router += std::abs(x);
    EXPECT_GT(router, 0.0);
  }
}

TEST(MoeModel, RecomputePoliciesGiveTheSameLossAuxAndGradients) {
  const ModelConfig c = [] {
    ModelConfig m = tiny_moe(2);
    m.moe_capacity_factor = 1.0;  // drops too
    return m;
  }();
  const std::int64_t B = 2, S = 12;
  const MoeTokens t = moe_tokens(B * S, c.vocab_size, 9);
  const TokenBatch batch{B, S, t.ids.data(), t.labels.data()};
  MemoryTracker t0, t1, t2;
  LlamaModel none(c, t0, 4, Recompute::None), mlp(c, t1, 4, Recompute::Mlp),
      full(c, t2, 4, Recompute::Full);
  const LossResult r0 = none.forward_backward(batch, 0.05);
  EXPECT_GT(r0.moe.dropped, 0);
  // The load (docs/moe.md "Load metrics"): kept + dropped = tokens x k x layers.
  std::int64_t assignments = r0.moe.dropped;
  for (const std::int64_t kept : r0.moe.tokens_per_expert) assignments += kept;
  EXPECT_EQ(assignments, B * S * c.num_experts_per_tok * c.num_hidden_layers);
  EXPECT_GE(r0.moe.imbalance(), 1.0);
  for (LlamaModel* m : {&mlp, &full}) {
    const LossResult r = m->forward_backward(batch, 0.05);
    EXPECT_EQ(r.sum, r0.sum);
    EXPECT_EQ(r.aux, r0.aux);  // a recomputed forward does not count its layer twice
    EXPECT_EQ(r.moe.dropped, r0.moe.dropped);  // nor its load
    EXPECT_EQ(r.moe.tokens_per_expert, r0.moe.tokens_per_expert);
    auto a = named_tensors(m->grads()), b = named_tensors(none.grads());
    for (std::size_t i = 0; i < a.size(); ++i)
      EXPECT_LE(relative_difference(*a[i].tensor, *b[i].tensor), 1e-6) << a[i].name;
  }
}

// docs/moe.md "What runs where": the mesh strategies and TSP's broadcast-ring schedule run a
// mixture of experts, a capacity factor where every rank routes the job's whole micro-batch
// (single, tp, tpsp), each with pipeline stages too; TSP's allgather schedule (with or without
// stages) and a capacity beside tsp, sp or dp are refused before any work, naming what runs
// them.
TEST(MoeModel, TheMeshAndTspRunItAndTheRestRefuseNamingWhatRunsIt) {
  ModelConfig c = tiny_moe(2);
  auto plan_of = [](const char* strategy, int degree, const char* mesh = "") {
    return parallel::make_parallel_config(strategy, degree, mesh, false,
                                          parallel::TokenLayoutKind::Zigzag);
  };
  auto refusal = [&](const parallel::ParallelConfig& p, const ModelConfig& m) -> std::string {
    try {
      parallel::validate_plan(p, m, 16, 2, p.world());
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  parallel::ParallelConfig tpsp = plan_of("tp", 2);
  tpsp.sequence_parallel = true;
  for (const parallel::ParallelConfig& p :
       {plan_of("single", 1), plan_of("dp", 2), plan_of("tp", 2), tpsp, plan_of("sp", 2),
        plan_of("tp", 1, "dp=2,tp=2"), plan_of("tp", 1, "tp=2,sp=2"), plan_of("tsp", 2),
        plan_of("tp", 1, "pp=2,tp=2"), plan_of("tsp", 1, "pp=2,tsp=2")})
    EXPECT_EQ(refusal(p, c), "") << p.describe();
  parallel::ParallelConfig allgather = plan_of("tsp", 2);
  allgather.tsp_schedule = parallel::TspSchedule::Allgather;
  const std::string a = refusal(allgather, c);
  EXPECT_THAT(a, ::testing::HasSubstr("num_local_experts is 4"));
  EXPECT_THAT(a, ::testing::HasSubstr("(--tsp-schedule allgather) does not support them"));
  EXPECT_THAT(a, ::testing::HasSubstr("--strategy single, dp, tp, tpsp, sp/cp"));
  parallel::ParallelConfig staged_allgather = plan_of("tsp", 1, "pp=2,tsp=2");
  staged_allgather.tsp_schedule = parallel::TspSchedule::Allgather;
  EXPECT_THAT(refusal(staged_allgather, c),
              ::testing::HasSubstr("(--tsp-schedule allgather) does not support them"));
  c.moe_capacity_factor = 1.25;  // the capacity: where every rank routes the whole micro-batch
  for (const parallel::ParallelConfig& p : {plan_of("single", 1), plan_of("tp", 2), tpsp})
    EXPECT_EQ(refusal(p, c), "") << p.describe();
  for (const parallel::ParallelConfig& p : {plan_of("dp", 2), plan_of("sp", 2), plan_of("tsp", 2)})
    EXPECT_THAT(refusal(p, c), ::testing::HasSubstr("--moe-capacity-factor 1.25 under"))
        << p.describe();
}

// The step's expert load: sums per expert, max / mean, and a mismatch refused.
TEST(MoeLoad, AddsPerExpertAndMeasuresMaxOverMean) {
  MoeLoad load;
  EXPECT_EQ(load.imbalance(), 0.0);  // no assignment yet
  load.add({3, 0, 1, 0}, 2);
  load.add({1, 0, 2, 1}, 1);
  EXPECT_EQ(load.tokens_per_expert, (std::vector<std::int64_t>{4, 0, 3, 1}));
  EXPECT_EQ(load.dropped, 3);
  EXPECT_DOUBLE_EQ(load.imbalance(), 4.0 / (8.0 / 4.0));
  MoeLoad balanced;
  balanced.add({5, 5, 5}, 0);
  EXPECT_DOUBLE_EQ(balanced.imbalance(), 1.0);
  EXPECT_THROW(load.add({1, 2}, 0), Error);
  MoeLoad idle;
  idle.add({0, 0}, 0);
  EXPECT_EQ(idle.imbalance(), 0.0);
}

}  // namespace
}  // namespace origami
