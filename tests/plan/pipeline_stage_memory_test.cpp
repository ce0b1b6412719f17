// The planner's memory per pipeline stage (plan::memory_of_stage, docs/planner.md "Pipeline
// stages") against the dry run's per rank (which equals a real run's per stage and category,
// tests/dryrun/dry_run_test.cpp), and the pre-run memory check under pp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../parallel/harness.h"
#include "../sanitizers.h"
#include "origami/core/error.h"
#include "origami/core/memory_tracker.h"
#include "origami/dryrun/training.h"
#include "origami/parallel/registry.h"
#include "origami/plan/cost_model.h"
#include "origami/train/memory_check.h"
#include "origami/train/trainer.h"

namespace origami {
namespace {

using parallel::make_parallel_config;
using parallel::TokenLayoutKind;

std::int64_t planned(const plan::Memory& m, MemCategory c) {
  switch (c) {
    case MemCategory::Parameters: return m.parameters;
    case MemCategory::Gradients: return m.gradients;
    case MemCategory::OptimizerState: return m.optimizer;
    case MemCategory::Activations: return m.activations;
    case MemCategory::Logits: return m.logits;
    case MemCategory::CommBuffers: return m.comm_buffers;
    case MemCategory::Workspace: return m.workspace;
    default: return -1;  // not a planner category
  }
}

struct StagedLayout {
  const char* name;
  parallel::ParallelConfig plan;
  ModelConfig model;
  std::int64_t micro_batches;
};

// Every category of every rank within 5% of the dry run's: pp 2 (2 layers a stage), pp 2 x
// tsp 2, and interleaved pp 2 x 2 chunks (1 layer a chunk), 3 (or 4) micro-batches.
TEST(PlanPipelineStages, EveryCategoryOfEveryStageWithinFivePercentOfTheDryRun) {
  const auto z = TokenLayoutKind::Zigzag;
  parallel::ParallelConfig interleaved = make_parallel_config("dp", 1, "pp=2", false, z);
  interleaved.pp_virtual = 2;
  const ModelConfig four_layers = parity::make_model(97, 64, 96, 4, 2, 4);
  const std::vector<StagedLayout> layouts = {
      {"pp2", make_parallel_config("dp", 1, "pp=2", false, z), four_layers, 3},
      {"pp2xtsp2", make_parallel_config("tsp", 1, "pp=2,tsp=2", false, z), four_layers, 3},
      {"pp2_virtual2", interleaved, four_layers, 4}};
  std::vector<const char*> policies = {"none", "mlp", "full"};
#ifdef ORIGAMI_TESTS_SANITIZED
  policies = {"none", "full"};
#endif
  double worst = 0;
  std::string worst_at;
  for (const StagedLayout& l : layouts)
    for (const char* recompute : policies) {
      DryRunOptions o;
      o.seq = 32;
      o.batch = 2;
      o.grad_accum = l.micro_batches;
      o.steps = 1;
      o.recompute = recompute;
      const DryRunReport dry = dry_run(l.model, l.plan, o);
      plan::Workload w;
      w.batch = o.batch;
      w.grad_accum = o.grad_accum;
      w.seq = o.seq;
      w.recompute = plan::parse_recompute(recompute);
      const int per_stage = l.plan.world() / l.plan.pp;
      for (std::size_t k = 0; k < dry.ranks.size(); ++k) {
        const int stage = static_cast<int>(k) / per_stage;  // pp is the outermost axis
        const plan::Memory p = plan::memory_of_stage(l.model, l.plan, w, stage);
        const std::string what = std::string(l.name) + " " + recompute + " rank " +
                                 std::to_string(k) + " stage " + std::to_string(stage);
        for (int i = 0; i < kNumMemCategories; ++i) {
          const auto c = static_cast<MemCategory>(i);
          const std::int64_t predicted = planned(p, c);
          if (predicted < 0) continue;
          const double measured = double(dry.ranks[k].memory.peak[static_cast<std::size_t>(i)]);
          const double rel = measured == 0 ? (predicted == 0 ? 0.0 : 1.0)
                                           : std::abs(double(predicted) - measured) / measured;
          EXPECT_LE(rel, 0.05) << what << " " << mem_category_name(c) << ": predicted "
                               << predicted << " dry run " << measured;
          if (rel > worst) {
            worst = rel;
            worst_at = what + " " + std::string(mem_category_name(c));
          }
        }
      }
    }
  std::printf("worst per-stage deviation %.2f%% (%s)\n", 100 * worst, worst_at.c_str());
}

// The run's prediction is its worst stage; the memory check uses it, so a pp run that fits
// its cap passes where the whole-model estimate (the check before per-stage memory) refused it.
TEST(PlanPipelineStages, TheMemoryCheckAdmitsAPipelineRunThatFits) {
  TrainOptions o;
  o.model = parity::make_model(97, 64, 96, 4, 2, 8);
  o.seq = 32;
  o.batch = 2;
  o.grad_accum = 4;
  const auto z = TokenLayoutKind::Zigzag;
  const parallel::ParallelConfig staged = make_parallel_config("dp", 1, "pp=4", false, z);
  plan::Workload w;
  w.batch = o.batch;
  w.grad_accum = o.grad_accum;
  w.seq = o.seq;
  const ModelConfig m = model_for_run(o.model, o.seq);
  const std::int64_t per_stage = plan::memory_per_device(m, staged, w).total();
  std::int64_t worst = 0;
  for (int s = 0; s < staged.pp; ++s)
    worst = std::max(worst, plan::memory_of_stage(m, staged, w, s).total());
  EXPECT_EQ(per_stage, worst);
  // What the check estimated before: every layer, the embedding and the head on each rank.
  const std::int64_t whole = plan::memory_per_device(m, make_parallel_config("dp", 1, "", false, z), w).total();
  ASSERT_LT(per_stage, whole);
  o.memory_cap = (per_stage + whole) / 2;
  EXPECT_NO_THROW(check_run_memory(o, staged, 4));
  EXPECT_THROW(check_run_memory(o, make_parallel_config("dp", 1, "", false, z), 1), ConfigError);
  o.memory_cap = per_stage - 1;  // the worst stage does not fit
  EXPECT_THROW(check_run_memory(o, staged, 4), ConfigError);
}

}  // namespace
}  // namespace origami
