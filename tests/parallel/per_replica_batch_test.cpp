// The micro-batch is per data-parallel replica (train/batch_size.h), through the training loop
// itself: a run of dp=2 x tsp=2 and one of dp=2 x tp=2 at --batch 1 per replica read the same
// sequences as one device at --batch 2 (its micro-batch is every replica's), so every step's
// loss and gradient norm, and every parameter after the steps, equal the one device's up to
// float32 rounding (the bounds of the parity suite, parity/harness.h: 1e-5 for a step's loss,
// 1e-4 per tensor after AdamW steps).
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "checkpoint/ckpt_util.h"
#include "origami/parallel/shard_spec.h"
#include "parallel/harness.h"

namespace origami::ckpt_test {
namespace {

// The checkpoint's parameters as whole tensors (the single-device layout).
std::vector<std::vector<float>> whole_parameters(const std::string& dir, MemoryTracker& tracker) {
  const ModelConfig cfg = tiny_model();
  const auto specs = parallel::make_shard_specs(cfg, 1, 0);
  ModelTensors params = parallel::allocate_sharded(cfg, specs, tracker, MemCategory::Parameters);
  AdamW opt(params, tracker, kernels::AdamWHyper{});
  ckpt::load(dir, cfg, {&specs, &params, &opt});
  std::vector<std::vector<float>> out;
  for (NamedTensor& t : named_tensors(params)) out.push_back(parity::to_vector(*t.tensor));
  return out;
}

struct Trained {
  TrainResult result;
  std::vector<std::vector<float>> params;
};

Trained train_with(const Layout& l, std::int64_t batch, const std::string& tag) {
  const std::string dir = fresh_dir(tag);
  TrainOptions o = tiny_options(l, 3);
  o.batch = batch;
  o.grad_accum = 2;
  o.lr = parity::test_hyper().lr;  // the parity suite's: AdamW amplifies rounding less
  o.checkpoint.save_dir = dir;
  Trained r{quiet_train(o), {}};
  MemoryTracker tracker("params");
  r.params = whole_parameters(ckpt::checkpoint_dir(dir, 3), tracker);
  std::filesystem::remove_all(dir);
  return r;
}

TEST(PerReplicaMicroBatch, DpTimesTspAndDpTimesTpAtOnePerReplicaEqualOneDevice) {
  const Trained one = train_with({"single", 1, ""}, 2, "one");
  ASSERT_EQ(one.result.steps.size(), 3u);
  for (const Layout& l : {Layout{"tsp", 1, "dp=2,tsp=2"}, Layout{"tp", 1, "dp=2,tp=2"}}) {
    const Trained par = train_with(l, 1, "par");
    ASSERT_EQ(par.result.steps.size(), 3u) << l.name();
    for (std::size_t s = 0; s < 3; ++s) {
      const StepStats &a = par.result.steps[s], &b = one.result.steps[s];
      EXPECT_EQ(a.tokens, b.tokens) << l.name();  // the global batch: 2 x 2 x 24 per step
      EXPECT_LE(parity::relative_difference(a.loss, b.loss), parity::kGradTolerance)
          << l.name() << " step " << s + 1 << ": " << a.loss << " vs " << b.loss;
      EXPECT_LE(parity::relative_difference(a.grad_norm, b.grad_norm), parity::kStepTolerance)
          << l.name() << " step " << s + 1;
    }
    ASSERT_EQ(par.params.size(), one.params.size());
    for (std::size_t i = 0; i < one.params.size(); ++i)
      EXPECT_LE(parity::relative_difference(par.params[i], one.params[i]), parity::kStepTolerance)
          << l.name() << " parameter " << i << " after 3 steps";
  }
}

// The same layout with the old convention's batch (2 sequences split over dp=2) would read
// half the tokens: a run at --batch 2 per replica is not the one device's --batch 2 run, so
// the comparison above can fail.
TEST(PerReplicaMicroBatch, TwoPerReplicaIsTwiceTheOneDevicesBatch) {
  const Trained one = train_with({"single", 1, ""}, 2, "one2");
  const Trained par = train_with({"tsp", 1, "dp=2,tsp=2"}, 2, "par2");
  EXPECT_EQ(par.result.steps[0].tokens, 2 * one.result.steps[0].tokens);
  EXPECT_GT(parity::relative_difference(par.result.steps[1].loss, one.result.steps[1].loss),
            parity::kStepTolerance);
}

}  // namespace
}  // namespace origami::ckpt_test
