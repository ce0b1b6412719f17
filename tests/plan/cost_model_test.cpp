// The planner's closed-form model against real runs of the engine on tiny models over the
// threads transport: bytes per rank per collective equal the communicator's accounting
// exactly, and every modelled memory category equals the rank's tracker exactly (the brief
// allows 5%; the model is exact for the categories it covers, so the test asserts equality).
#include <gtest/gtest.h>

#include <mutex>
#include <set>

#include "../parallel/threads_util.h"
#include "origami/core/error.h"
#include "origami/kernels/threads.h"
#include "origami/plan/cost_model.h"

namespace origami::parity {
namespace {

struct Measured {
  plan::Memory memory;
  std::map<std::string, comm::OpStats> micro, grad;  // "axis/op" -> stats
};

plan::Recompute to_plan(Recompute r) {
  return r == Recompute::None ? plan::Recompute::None
         : r == Recompute::Mlp ? plan::Recompute::Mlp
                               : plan::Recompute::Full;
}

// World rank `who`'s tracker and per-axis stats after one micro-batch's forward+backward and
// the step's gradient reductions.
Measured measure(const ModelConfig& m, const parallel::ParallelConfig& p, Recompute r,
                 std::int64_t B, std::int64_t S, int who) {
  Case c;
  c.model = m;
  c.plan = p;
  c.batch = B;
  c.seq = S;
  const Data d = make_data(c, 1);
  Measured out;
  std::mutex mu;
  comm::run_ranks(p.world(), [&](comm::Communicator& world) {
    kernels::set_thread_count(1);
    parallel::ParallelGroups groups(world, p);
    MemoryTracker& t = world.tracker();
    parallel::RankModel model(m, groups, S, r, t, kSeed);
    AdamW opt(model.params(), t, test_hyper());
    // The rank's data-parallel shard: B / dp of the micro-batch's sequences.
    const TokenBatch all = micro_batch(c, d, 0, 0);
    const std::int64_t per = B / p.dp, first = groups.dp().rank() * per * S;
    const parallel::LocalBatch b =
        model.localize({per, S, all.input_ids + first, all.labels + first});
    const std::vector<std::string> axes{"dp", "tp", "sp"};
    for (const auto& a : axes) groups.axis(a).reset_stats();
    t.reset_peaks();
    model.run(b, true, 1e-2);
    std::map<std::string, comm::OpStats> micro, grad;
    for (const auto& a : axes) {
      for (const auto& [op, st] : groups.axis(a).stats().ops) micro[a + "/" + op] = st;
      groups.axis(a).reset_stats();
    }
    model.reduce_gradients();
    for (const auto& a : axes)
      for (const auto& [op, st] : groups.axis(a).stats().ops) grad[a + "/" + op] = st;
    if (world.rank() == who) {
      std::lock_guard lock(mu);
      out.memory.parameters = t.current(MemCategory::Parameters);
      out.memory.gradients = t.current(MemCategory::Gradients);
      out.memory.optimizer = t.current(MemCategory::OptimizerState);
      out.memory.activations = t.peak(MemCategory::Activations);
      out.memory.logits = t.peak(MemCategory::Logits);
      out.micro = std::move(micro);
      out.grad = std::move(grad);
    }
  });
  return out;
}

void expect_ops(const std::vector<plan::CommOp>& predicted,
                const std::map<std::string, comm::OpStats>& measured, const std::string& what) {
  std::map<std::string, plan::CommOp> p;
  for (const auto& op : predicted) p[op.axis + "/" + op.op] = op;
  for (const auto& [key, st] : measured) {
    if (st.calls == 0) continue;
    ASSERT_TRUE(p.count(key)) << what << ": unpredicted " << key << " (" << st.calls << " calls)";
    EXPECT_EQ(p[key].calls, st.calls) << what << " " << key;
    EXPECT_EQ(p[key].bytes_sent, st.bytes_sent) << what << " " << key;
  }
  for (const auto& [key, op] : p)
    EXPECT_TRUE(measured.count(key) && measured.at(key).calls > 0)
        << what << ": predicted " << key << " never issued";
}

struct Point {
  const char* name;
  int dp, tp, sp;
  bool seqpar;
};

// The baselines, alone and under DP (the parity matrix's families).
const Point kPoints[] = {
    {"single", 1, 1, 1, false}, {"dp2", 2, 1, 1, false},   {"tp2", 1, 2, 1, false},
    {"tpsp2", 1, 2, 1, true},   {"sp2", 1, 1, 2, false},   {"tp4", 1, 4, 1, false},
    {"sp4", 1, 1, 4, false},    {"tp2sp2", 1, 2, 2, false}, {"tpsp2sp2", 1, 2, 2, true},
    {"dp2tpsp2", 2, 2, 1, true}, {"dp2sp2", 2, 1, 2, false},
};

class CostModel : public ::testing::TestWithParam<Recompute> {};

TEST_P(CostModel, EqualsTheEngineOnEveryBaseline) {
  // Vocabulary 97 (padded under tp), 3 layers; and a grouped-query model (4 heads, 2 kv).
  const ModelConfig m = make_model(97, 32, 40, 4, 4, 3);
  const ModelConfig gqa = make_model(64, 32, 48, 4, 2, 2);
  for (const ModelConfig* model : {&m, &gqa}) {
    for (const Point& pt : kPoints) {
      const std::int64_t B = 2, S = 16;
      const parallel::ParallelConfig pc = make_plan(pt.dp, pt.tp, pt.sp, pt.seqpar);
      const plan::Mesh mesh{pt.dp, pt.tp, pt.sp, pt.seqpar};
      plan::Workload w;
      w.batch = B;
      w.seq = S;
      w.recompute = to_plan(GetParam());
      if (model->num_key_value_heads % pt.tp != 0) {  // the engine refuses it, so must we
        EXPECT_THROW(plan::memory_per_device(*model, mesh, w), ConfigError) << pt.name;
        continue;
      }
      const std::string what = std::string(pt.name) + " " + recompute_name(GetParam()) +
                               (model == &gqa ? " gqa" : "");
      const Measured got = measure(*model, pc, GetParam(), B, S, 0);
      const plan::Memory want = plan::memory_per_device(*model, mesh, w);
      EXPECT_EQ(want.parameters, got.memory.parameters) << what;
      EXPECT_EQ(want.gradients, got.memory.gradients) << what;
      EXPECT_EQ(want.optimizer, got.memory.optimizer) << what;
      EXPECT_EQ(want.activations, got.memory.activations) << what;
      EXPECT_EQ(want.logits, got.memory.logits) << what;
      expect_ops(plan::comm_per_micro_batch(*model, mesh, w), got.micro, what + " micro-batch");
      expect_ops(plan::comm_gradient_reduction(*model, mesh, w.elem), got.grad,
                 what + " gradient reduction");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, CostModel,
                         ::testing::Values(Recompute::None, Recompute::Mlp, Recompute::Full),
                         [](const auto& info) { return recompute_name(info.param); });

TEST(CostModelRings, AllReduceBytesFollowTheUnevenBlocks) {
  // 10 elements over 4 ranks: blocks 3,3,2,2; rank r sends (10 - c_r) + (10 - c_{r+1}).
  EXPECT_EQ(plan::all_reduce_sent(10, 4, 0, 4), (7 + 7) * 4);
  EXPECT_EQ(plan::all_reduce_sent(10, 4, 1, 4), (7 + 8) * 4);
  EXPECT_EQ(plan::all_reduce_sent(10, 4, 3, 4), (8 + 7) * 4);
  EXPECT_EQ(plan::all_reduce_sent(10, 1, 0, 4), 0);
  EXPECT_EQ(plan::all_gather_sent(5, 3, 2), 20);
  EXPECT_EQ(plan::reduce_scatter_sent(5, 3, 2), 20);
}

TEST(CostModelFlops, EqualsTheEnginesFormula) {
  for (const ModelConfig& m : {make_model(97, 32, 40, 4, 2, 3), model_preset("7b")})
    for (std::int64_t S : {1, 17, 4096})
      EXPECT_DOUBLE_EQ(plan::training_flops(m, 3, S), training_flops(m, 3, S)) << S;
}

TEST(CostModelLayout, RefusesWhatTheEngineRefuses) {
  const ModelConfig m = make_model(64, 32, 48, 4, 2, 2);
  plan::Workload w;
  w.batch = 2;
  w.seq = 16;
  EXPECT_THROW(plan::memory_per_device(m, {1, 4, 1, false}, w), ConfigError);  // kv heads 2
  EXPECT_THROW(plan::memory_per_device(m, {4, 1, 1, false}, w), ConfigError);  // batch 2
  EXPECT_THROW(plan::memory_per_device(m, {1, 1, 3, false}, w), ConfigError);  // 16 % 6
  EXPECT_THROW(plan::memory_per_device(m, {0, 1, 1, false}, w), ConfigError);
  EXPECT_THROW(plan::parse_recompute("some"), ConfigError);
  w.batch = 1;
  w.seq = 6;  // TP-SP: the rank's 6 rows split over tp 2, not over tp 4
  const ModelConfig mha = make_model(64, 32, 48, 4, 4, 2);
  EXPECT_NO_THROW(plan::memory_per_device(mha, {1, 2, 1, true}, w));
  EXPECT_THROW(plan::memory_per_device(mha, {1, 4, 1, true}, w), ConfigError);
  EXPECT_NO_THROW(plan::memory_per_device(mha, {1, 4, 1, false}, w));  // plain TP: no split
}

}  // namespace
}  // namespace origami::parity

namespace origami::parity {
namespace {

TEST(CostModelUneven, EveryTpRankSendsWhatItsBlocksSay) {
  // 6 rows over tp 4: the target logits' all-reduce (6 elements) has blocks 2,2,1,1, so the
  // ranks send different bytes; each rank's prediction must still be exact.
  const ModelConfig m = make_model(97, 32, 40, 4, 4, 2);
  plan::Workload w;
  w.batch = 1;
  w.seq = 6;
  const plan::Mesh mesh{1, 4, 1, false};
  std::set<std::int64_t> distinct;
  for (int r = 0; r < 4; ++r) {
    const Measured got = measure(m, make_plan(1, 4, 1), Recompute::None, 1, 6, r);
    const auto want = plan::comm_per_micro_batch(m, mesh, w, r);
    expect_ops(want, got.micro, "rank " + std::to_string(r));
    for (const auto& op : want)
      if (op.op == "all_reduce") distinct.insert(op.bytes_sent);
  }
  EXPECT_GT(distinct.size(), 1u);  // the case really is uneven
}

}  // namespace
}  // namespace origami::parity
