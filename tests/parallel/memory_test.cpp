// Memory evidence from each rank's tracker: TP holds 1/T of the parameter, gradient and
// optimizer bytes (RMSNorm weights replicated), SP saves about 1/Σ of the activations, and
// the recompute policies shrink the saved activations in the order none > mlp > full.
#include <gtest/gtest.h>

#include "origami/kernels/threads.h"
#include "threads_util.h"

namespace origami::parity {
namespace {

struct Measured {
  std::int64_t params = 0, grads = 0, optimizer = 0, activations_peak = 0;
};

// Per-rank bytes of world rank 0 after one forward+backward and the optimizer's allocation.
Measured measure(const ModelConfig& m, const parallel::ParallelConfig& p, Recompute r,
                 std::int64_t B, std::int64_t S) {
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
    std::vector<parallel::LocalBatch> micro{model.localize(micro_batch(c, d, 0, 0))};
    model.run(micro[0], true, 1e-3);
    if (world.rank() == 0) {
      out.params = t.current(MemCategory::Parameters);
      out.grads = t.current(MemCategory::Gradients);
      out.optimizer = t.current(MemCategory::OptimizerState);
      out.activations_peak = t.peak(MemCategory::Activations);
    }
  });
  return out;
}

class Memory : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { kernels::set_thread_count(1); }
};

TEST_F(Memory, TensorParallelHoldsOneTthOfParametersGradientsAndOptimizerState) {
  const ModelConfig m = make_model(128, 64, 128, 4, 4);
  const Measured one = measure(m, make_plan(1, 1, 1), Recompute::None, 1, 16);
  // RMSNorm weights: 2 per layer + the final one, replicated on every rank.
  const std::int64_t norms = (2 * m.num_hidden_layers + 1) * m.hidden_size * 4;
  EXPECT_EQ(one.params, m.num_parameters() * 4);
  for (int T : {2, 4}) {
    const Measured tp = measure(m, make_plan(1, T, 1), Recompute::None, 1, 16);
    EXPECT_EQ(tp.params, (one.params - norms) / T + norms) << "T=" << T;
    EXPECT_EQ(tp.grads, (one.grads - norms) / T + norms) << "T=" << T;
    EXPECT_EQ(tp.optimizer, (one.optimizer - 2 * norms) / T + 2 * norms) << "T=" << T;
  }
}

TEST_F(Memory, SequenceParallelSavesAboutOneSigmathOfTheActivations) {
  const ModelConfig m = make_model(128, 64, 128, 4, 4);
  const Measured one = measure(m, make_plan(1, 1, 1), Recompute::None, 2, 48);
  for (int sigma : {2, 4}) {
    const Measured sp = measure(m, make_plan(1, 1, sigma), Recompute::None, 2, 48);
    const double ratio = double(sp.activations_peak) * sigma / double(one.activations_peak);
    EXPECT_NEAR(ratio, 1.0, 0.02) << "Σ=" << sigma << ": " << sp.activations_peak << " vs "
                                  << one.activations_peak;
    EXPECT_EQ(sp.params, one.params);  // SP replicates the weights
  }
}

TEST_F(Memory, RecomputePoliciesShrinkSavedActivations) {
  const ModelConfig m = make_model(128, 64, 128, 4, 4, 3);
  for (const parallel::ParallelConfig& p : {make_plan(1, 1, 1), make_plan(1, 2, 1, true)}) {
    const std::int64_t none = measure(m, p, Recompute::None, 2, 32).activations_peak;
    const std::int64_t mlp = measure(m, p, Recompute::Mlp, 2, 32).activations_peak;
    const std::int64_t full = measure(m, p, Recompute::Full, 2, 32).activations_peak;
    const std::int64_t block_rows = 2 * 32;  // TP-SP gathers all rows into the blocks
    // mlp drops exactly the gate and up pre-activations of every layer but the one being
    // recomputed at the peak ([rows, f/T] each).
    EXPECT_LT(mlp, none);
    EXPECT_GE(none - mlp,
              2 * (m.num_hidden_layers - 1) * block_rows * (m.intermediate_size / p.tp) * 4);
    // full keeps one [rows, h] input per layer plus one layer's full set at a time.
    EXPECT_LT(full, mlp);
    EXPECT_LT(full, none / 2);
  }
}

}  // namespace
}  // namespace origami::parity
