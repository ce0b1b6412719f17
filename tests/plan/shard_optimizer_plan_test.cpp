// The optimizer state sharded over dp (--shard-optimizer, ZeRO-1) in the planner and the dry
// run: a real (computed) step's tracker peaks equal the dry run's per category and rank, the
// planner's optimizer state equals dp rank 0's exactly (fp32 and bf16 with its fp32 master
// copy), and the planner's dp collectives (reduce-scatter of the gradients, all-gather of the
// parameters, the norm's scalars) equal the engine's calls and bytes.
#include <map>

#include <gtest/gtest.h>

#include "origami/dryrun/training.h"
#include "origami/plan/predict.h"
#include "small_plan_model.h"

namespace origami::plan {
namespace {

Hardware zero1_hardware() {
  Hardware hw;
  hw.name = "dry-run";
  hw.memory_bytes = std::int64_t{1} << 50;
  hw.peak_flops_fp32 = hw.peak_flops_bf16 = 1e12;
  hw.achievable = 1;
  hw.runtime_overhead_bytes = 0;
  return hw;
}

struct Zero1Layout {
  const char* name;
  const char* strategy;
  const char* mesh;
  bool tpsp;
};

TEST(ShardOptimizerPlan, PlannerDryRunAndRealRunAgree) {
  // small_plan_model: its norms (64) do not split evenly over dp 3.
  const ModelConfig m = small_plan_model();
  const Zero1Layout layouts[] = {{"dp2", "dp", "dp=2", false},
                                 {"dp3", "dp", "dp=3", false},
                                 {"dp2xtsp2", "tsp", "dp=2,tsp=2", false},
                                 {"dp2xtpsp2", "tp", "dp=2,tp=2", true}};
  for (const Zero1Layout& l : layouts) {
    SCOPED_TRACE(l.name);
    const parallel::ParallelConfig pc = parallel::make_parallel_config(
        l.strategy, 1, l.mesh, l.tpsp, parallel::TokenLayoutKind::Zigzag);
    for (const Precision& precision : {Precision::fp32(), Precision::bf16()}) {
      SCOPED_TRACE(precision.name);
      DryRunOptions o;
      o.seq = 16;
      o.batch = 2;
      o.shard_optimizer = true;
      o.precision = precision;
      o.flop_rate = 1e12;
      const DryRunReport dry = dry_run(m, pc, o);
      if (precision.name == "fp32") {  // the computed run of the same code
        DryRunOptions e = o;
        e.execute = true;
        const DryRunReport real = dry_run(m, pc, e);
        for (std::size_t r = 0; r < dry.ranks.size(); ++r) {
          for (int c = 0; c < kNumMemCategories; ++c) {
            EXPECT_EQ(dry.ranks[r].memory.peak[static_cast<std::size_t>(c)],
                      real.ranks[r].memory.peak[static_cast<std::size_t>(c)])
                << "rank " << r << " " << mem_category_name(static_cast<MemCategory>(c));
          }
        }
      }
      Workload w;
      w.batch = o.batch;
      w.seq = o.seq;
      w.set_precision(precision);
      w.shard_optimizer = true;
      const Prediction p = predict(m, pc, w, zero1_hardware());
      const auto opt = static_cast<std::size_t>(MemCategory::OptimizerState);
      EXPECT_EQ(p.memory.optimizer, dry.ranks[0].memory.peak[opt]);
      Workload whole = w;
      whole.shard_optimizer = false;
      const Prediction u = predict(m, pc, whole, zero1_hardware());
      EXPECT_LT(p.memory.optimizer, u.memory.optimizer);
      EXPECT_LE(p.memory.optimizer * pc.dp, u.memory.optimizer + pc.dp * 64 * 12);
      // The dp axis' collectives of rank 0, as issued by the engine.
      std::map<std::string, std::pair<std::int64_t, std::int64_t>> predicted;
      for (const CommCost& c : p.comm)
        if (c.op.axis == "dp") {
          predicted[c.op.op].first += c.op.calls;
          predicted[c.op.op].second += c.op.bytes_sent;
        }
      ASSERT_TRUE(dry.ranks[0].comm.count("dp"));
      const comm::CommStats& dp = dry.ranks[0].comm.at("dp");
      for (const auto& [op, st] : dp.ops) {
        if (op == "split") continue;
        EXPECT_EQ(predicted[op].first, st.calls) << "dp " << op << " calls";
        EXPECT_EQ(predicted[op].second, st.bytes_sent) << "dp " << op << " bytes";
      }
      EXPECT_GT(predicted["reduce_scatter"].first, 0);
      EXPECT_GT(predicted["all_gather"].first, 0);
    }
  }
}

}  // namespace
}  // namespace origami::plan
