// Memory evidence from each rank's tracker, instantiated for every registered strategy
// (parallel/registry.h) the claim applies to: a strategy that shards the weights over D ranks
// holds 1/D of the parameter, gradient and optimizer bytes (RMSNorm weights replicated), one
// that does not holds all of them; a strategy that splits the tokens over D ranks saves about
// 1/D of the activations; and under every strategy the recompute policies shrink the saved
// activations in the order none > mlp > full.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>

#include "origami/kernels/threads.h"
#include "origami/parallel/registry.h"
#include "threads_util.h"

namespace origami::parity {
namespace {

using parallel::ParallelConfig;

struct Measured {
  std::int64_t params = 0, grads = 0, optimizer = 0, activations_peak = 0;
};

// Per-rank bytes of world rank 0 after one forward+backward and the optimizer's allocation.
Measured measure(const ModelConfig& m, const ParallelConfig& p, Recompute r, std::int64_t B,
                 std::int64_t S) {
  Case c;
  c.model = m;
  c.plan = p;
  c.batch = B;
  c.seq = S;
  const Data d = make_data(c, 1);
  Measured out;
  comm::run_ranks(p.world(), [&](comm::Communicator& world) {
    parallel::ParallelGroups groups(world, p);
    MemoryTracker& t = world.tracker();
    parallel::RankModel model(m, groups, S, r, t, kSeed);
    AdamW opt(model.params(), t, test_hyper());
    t.reset_peaks();
    // The rank's data-parallel share of the micro-batch.
    const std::int64_t per = B / p.dp, first = groups.dp().rank() * per * S;
    const TokenBatch all = micro_batch(c, d, 0, 0);
    const parallel::LocalBatch b =
        model.localize({per, S, all.input_ids + first, all.labels + first});
    model.run(b, true, 1e-3);
    if (world.rank() == 0) {
      out.params = t.current(MemCategory::Parameters);
      out.grads = t.current(MemCategory::Gradients);
      out.optimizer = t.current(MemCategory::OptimizerState);
      out.activations_peak = t.peak(MemCategory::Activations);
    }
  });
  return out;
}

class Memory : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { kernels::set_thread_count(1); }
};
class ShardedMemory : public Memory {};
class ReplicatedMemory : public Memory {};
class TokenMemory : public Memory {};

TEST_P(ShardedMemory, HoldsOneDthOfParametersGradientsAndOptimizerState) {
  const ModelConfig m = make_model(128, 64, 128, 4, 4);
  const Measured one = measure(m, {}, Recompute::None, 2, 16);
  // RMSNorm weights: 2 per layer + the final one, replicated on every rank.
  const std::int64_t norms = (2 * m.num_hidden_layers + 1) * m.hidden_size * 4;
  EXPECT_EQ(one.params, m.num_parameters() * 4);
  for (int D : {2, 4}) {
    const Measured sharded = measure(m, strategy_at(GetParam(), D), Recompute::None, 2, 16);
    EXPECT_EQ(sharded.params, (one.params - norms) / D + norms) << "D=" << D;
    EXPECT_EQ(sharded.grads, (one.grads - norms) / D + norms) << "D=" << D;
    EXPECT_EQ(sharded.optimizer, (one.optimizer - 2 * norms) / D + 2 * norms) << "D=" << D;
  }
}

// Mixture of experts (docs/moe.md): TSP's weight ring and TP (mesh_moe.cpp) shard every
// expert's w1/w3/w2 1/D like the dense MLP; TSP's expert schedule gives each rank E/D whole
// experts. Either way a rank holds 1/D of the experts' bytes, the router [E, h] replicated
// like the norms.
TEST(MoeMemory, ShardingStrategiesHoldOneDthOfTheExpertsAndTheWholeRouter) {
  ModelConfig m = make_model(128, 64, 128, 4, 4);
  m.num_local_experts = 4;
  m.num_experts_per_tok = 2;
  const std::int64_t L = m.num_hidden_layers, h = m.hidden_size;
  const std::int64_t norms = (2 * L + 1) * h * 4, routers = L * m.num_local_experts * h * 4;
  const std::int64_t total = m.num_parameters() * 4;
  const std::int64_t experts = L * m.num_local_experts * 3 * h * m.intermediate_size * 4;
  const std::pair<const char*, parallel::MoeSchedule> layouts[] = {
      {"tsp", parallel::MoeSchedule::Ring},
      {"tsp", parallel::MoeSchedule::Expert},
      {"tp", parallel::MoeSchedule::Ring}};  // the mesh has one way: the dense MLP's shards
  for (const auto& [strategy, schedule] : layouts)
    for (int D : {2, 4}) {
      ParallelConfig p = strategy_at(strategy, D);
      p.moe_schedule = schedule;
      const Measured s = measure(m, p, Recompute::None, 2, 16);
      const std::string name =
          std::string(strategy) +
          (p.is_tsp() ? std::string(" moe-schedule ") + parallel::moe_schedule_name(schedule) : "");
      EXPECT_EQ(s.params, (total - norms - routers) / D + norms + routers) << name << " D=" << D;
      EXPECT_EQ(s.grads, (total - norms - routers) / D + norms + routers) << name << " D=" << D;
      // The expert bytes on the rank: everything else is known exactly (the other matrices
      // 1/D, norms and routers whole).
      const std::int64_t rank_experts = s.params - (total - norms - routers - experts) / D -
                                        norms - routers;
      std::printf("  %s D=%d: expert weights per rank %lld B of %lld (x D = %.3f)\n",
                  name.c_str(), D, static_cast<long long>(rank_experts),
                  static_cast<long long>(experts), double(rank_experts) * D / double(experts));
      EXPECT_EQ(rank_experts * D, experts) << name << " D=" << D;
    }
}

TEST_P(ReplicatedMemory, HoldsEveryParameter) {
  const ModelConfig m = make_model(128, 64, 128, 4, 4);
  const Measured one = measure(m, {}, Recompute::None, 4, 16);
  const Measured replica = measure(m, strategy_at(GetParam(), 2), Recompute::None, 4, 16);
  EXPECT_EQ(replica.params, one.params);
  EXPECT_EQ(replica.grads, one.grads);
  EXPECT_EQ(replica.optimizer, one.optimizer);
}

TEST_P(TokenMemory, SavesAboutOneDthOfTheActivations) {
  const ModelConfig m = make_model(128, 64, 128, 4, 4);
  const Measured one = measure(m, {}, Recompute::None, 2, 48);
  for (int D : {2, 4}) {
    const Measured split = measure(m, strategy_at(GetParam(), D), Recompute::None, 2, 48);
    const double ratio = double(split.activations_peak) * D / double(one.activations_peak);
    std::printf("  %s D=%d: saved activations %lld vs one device %lld (x D = %.3f)\n",
                GetParam().c_str(), D, static_cast<long long>(split.activations_peak),
                static_cast<long long>(one.activations_peak), ratio);
    EXPECT_NEAR(ratio, 1.0, 0.02) << "D=" << D;  // measured: exactly 1.000
  }
}

TEST_P(Memory, RecomputePoliciesShrinkSavedActivations) {
  const ModelConfig m = make_model(128, 64, 128, 4, 4, 3);
  for (const ParallelConfig& p : {ParallelConfig{}, strategy_at(GetParam(), 2)}) {
    const std::int64_t none = measure(m, p, Recompute::None, 2, 32).activations_peak;
    const std::int64_t mlp = measure(m, p, Recompute::Mlp, 2, 32).activations_peak;
    const std::int64_t full = measure(m, p, Recompute::Full, 2, 32).activations_peak;
    // The rows the blocks run on (a replica's share, split over the token axis; TP-SP gathers
    // every row of its replica into the blocks) and the MLP columns each holds (1/tp of them;
    // TSP's ring computes every column on its own rows).
    const std::int64_t block_rows = 2 / p.dp * 32 / p.token_degree();
    // mlp drops exactly the gate and up pre-activations of every layer but the one being
    // recomputed at the peak ([rows, f/tp] each).
    EXPECT_LT(mlp, none);
    EXPECT_GE(none - mlp,
              2 * (m.num_hidden_layers - 1) * block_rows * (m.intermediate_size / p.tp) * 4)
        << p.describe();
    // full keeps one [rows, h] input per layer plus one layer's full set at a time.
    EXPECT_LT(full, mlp) << p.describe();
    EXPECT_LT(full, none / 2) << p.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, Memory, ::testing::ValuesIn(strategies_where(any_strategy)),
                         strategy_param_name);
INSTANTIATE_TEST_SUITE_P(Strategies, ShardedMemory,
                         ::testing::ValuesIn(strategies_where(shards_weights)),
                         strategy_param_name);
INSTANTIATE_TEST_SUITE_P(Strategies, ReplicatedMemory,
                         ::testing::ValuesIn(strategies_where(replicates_weights)),
                         strategy_param_name);
INSTANTIATE_TEST_SUITE_P(Strategies, TokenMemory,
                         ::testing::ValuesIn(strategies_where(splits_tokens)), strategy_param_name);

}  // namespace
}  // namespace origami::parity
