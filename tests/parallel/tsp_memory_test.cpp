// TSP memory from each rank's tracker: parameter, gradient and optimizer bytes are one
// device's / D (RMSNorm weights replicated), saved activations about 1/D of one device's, and
// the recompute policies shrink them in the order none > mlp > full.
#include <gtest/gtest.h>

#include "origami/kernels/threads.h"
#include "threads_util.h"

namespace origami::parity {
namespace {

struct Measured {
  std::int64_t params = 0, grads = 0, optimizer = 0, activations_peak = 0;
};

Measured measure(const ModelConfig& m, int d, Recompute r, std::int64_t B, std::int64_t S) {
  const parallel::ParallelConfig p = make_tsp_plan(1, d);
  Case c;
  c.model = m;
  c.plan = p;
  c.batch = B;
  c.seq = S;
  const Data data = make_data(c, 1);
  Measured out;
  comm::run_ranks(d, [&](comm::Communicator& world) {
    parallel::ParallelGroups groups(world, p);
    MemoryTracker& t = world.tracker();
    parallel::RankModel model(m, groups, S, r, t, kSeed);
    AdamW opt(model.params(), t, test_hyper());
    t.reset_peaks();
    const parallel::LocalBatch b = model.localize(micro_batch(c, data, 0, 0));
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

class TspMemoryTracker : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { kernels::set_thread_count(1); }
};

TEST_F(TspMemoryTracker, OneDthOfParametersGradientsOptimizerAndActivations) {
  const ModelConfig m = make_model(128, 64, 128, 4, 4);
  const Measured one = measure(m, 1, Recompute::None, 2, 48);
  const std::int64_t norms = (2 * m.num_hidden_layers + 1) * m.hidden_size * 4;
  for (int d : {2, 4}) {
    const Measured t = measure(m, d, Recompute::None, 2, 48);
    EXPECT_EQ(t.params, (one.params - norms) / d + norms) << "D=" << d;
    EXPECT_EQ(t.grads, (one.grads - norms) / d + norms) << "D=" << d;
    EXPECT_EQ(t.optimizer, (one.optimizer - 2 * norms) / d + 2 * norms) << "D=" << d;
    const double ratio = double(t.activations_peak) * d / double(one.activations_peak);
    std::printf("  D=%d: saved activations %lld vs one device %lld (x D = %.3f)\n", d,
                static_cast<long long>(t.activations_peak),
                static_cast<long long>(one.activations_peak), ratio);
    EXPECT_NEAR(ratio, 1.0, 0.02) << "D=" << d;  // measured: exactly 1.000
  }
}

TEST_F(TspMemoryTracker, RecomputePoliciesShrinkSavedActivations) {
  const ModelConfig m = make_model(128, 64, 128, 4, 4, 3);
  const std::int64_t none = measure(m, 2, Recompute::None, 2, 32).activations_peak;
  const std::int64_t mlp = measure(m, 2, Recompute::Mlp, 2, 32).activations_peak;
  const std::int64_t full = measure(m, 2, Recompute::Full, 2, 32).activations_peak;
  const std::int64_t rows = 2 * 32 / 2;
  EXPECT_GE(none - mlp, 2 * (m.num_hidden_layers - 1) * rows * m.intermediate_size * 4);
  EXPECT_LT(full, mlp);
  EXPECT_LT(full, none / 2);
}

}  // namespace
}  // namespace origami::parity
