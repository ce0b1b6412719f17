// The bytes each rank moves in one forward+backward equal the schedule's formula (degree 2,
// where every ring collective sends exactly half of its buffer, or all of an all-reduce's):
//   TP     all-reduce over tp: embedding, 2 per layer forward, 2 per layer backward, the head's
//          dX ([R, h] each) and the target logits ([R]); all-gather of the (max, sum-exp) pairs
//   TP-SP  the same activations as reduce-scatter / all-gather pairs on [R/2, h] blocks, plus
//          the block inputs re-gathered in backward (2 per layer) — nothing is all-reduced
//          except the target logits
//   SP     K and V all-gathered per layer forward and again in backward, dK and dV
//          reduce-scattered: 6 collectives of [R, Kv*d] per layer
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "origami/kernels/threads.h"
#include "origami/parallel/layout.h"
#include "origami/parallel/strategies/mesh/schedule.h"
#include "threads_util.h"

namespace origami::parity {
namespace {

struct Moved {
  comm::OpStats all_reduce, all_gather, reduce_scatter;
};

Moved measure(const ModelConfig& m, const parallel::ParallelConfig& p, std::int64_t B,
              std::int64_t S, const std::string& axis) {
  Case c;
  c.model = m;
  c.plan = p;
  c.batch = B;
  c.seq = S;
  const Data d = make_data(c, 1);
  Moved out;
  comm::run_ranks(p.world(), [&](comm::Communicator& world) {
    kernels::set_thread_count(1);
    parallel::ParallelGroups groups(world, p);
    parallel::RankModel model(m, groups, S, Recompute::None, world.tracker(), kSeed);
    const parallel::LocalBatch b = model.localize(micro_batch(c, d, 0, 0));
    groups.axis(axis).reset_stats();
    model.run(b, true, 1e-2);
    if (world.rank() == 0) {
      const comm::CommStats s = groups.axis(axis).stats();
      out = {s.op("all_reduce"), s.op("all_gather"), s.op("reduce_scatter")};
    }
  });
  return out;
}

const ModelConfig kModel = make_model(64, 32, 64, 4, 2, 3);  // h 32, 3 layers, 2 kv heads
constexpr std::int64_t kB = 2, kS = 16, kL = 3, kH = 32;

TEST(CommunicationBytes, TensorParallel) {
  const std::int64_t R = kB * kS;  // every tp rank holds every row
  const Moved m = measure(kModel, make_plan(1, 2, 1), kB, kS, "tp");
  EXPECT_EQ(m.all_reduce.calls, 4 * kL + 3);
  EXPECT_EQ(m.all_reduce.bytes_sent, (4 * kL + 2) * R * kH * 4 + R * 4);
  EXPECT_EQ(m.all_gather.calls, 1);
  EXPECT_EQ(m.all_gather.bytes_sent, 2 * R * 4);
  EXPECT_EQ(m.reduce_scatter.calls, 0);
}

TEST(CommunicationBytes, TensorParallelWithSequenceParallelRegions) {
  const std::int64_t R = kB * kS, half = R / 2 * kH * 4;
  const Moved m = measure(kModel, make_plan(1, 2, 1, true), kB, kS, "tp");
  EXPECT_EQ(m.all_reduce.calls, 1);  // the target logits only
  EXPECT_EQ(m.all_reduce.bytes_sent, R * 4);
  EXPECT_EQ(m.reduce_scatter.calls, 4 * kL + 2);
  EXPECT_EQ(m.reduce_scatter.bytes_sent, (4 * kL + 2) * half);
  EXPECT_EQ(m.all_gather.calls, 6 * kL + 3);
  EXPECT_EQ(m.all_gather.bytes_sent, (6 * kL + 2) * half + 2 * R * 4);
}

TEST(CommunicationBytes, SequenceParallel) {
  const std::int64_t R = kB * kS / 2, kv = kModel.kv_dim();
  const Moved m = measure(kModel, make_plan(1, 1, 2), kB, kS, "sp");
  EXPECT_EQ(m.all_gather.calls, 4 * kL);
  EXPECT_EQ(m.all_gather.bytes_sent, 4 * kL * R * kv * 4);
  EXPECT_EQ(m.reduce_scatter.calls, 2 * kL);
  EXPECT_EQ(m.reduce_scatter.bytes_sent, 2 * kL * R * kv * 4);
  EXPECT_EQ(m.all_reduce.calls, 0);  // weight gradients are reduced once per step, not here
}

// A mixture of experts under the mesh (docs/moe.md "The mesh strategies") moves the dense
// model's messages (the MLP is entered and left alike) plus, per layer, the d routing weight
// partials [R, k] (doubles) all-reduced over tp in backward and the balance's 2E doubles
// all-reduced over sp in forward (never over tp: its ranks route the same rows).
TEST(CommunicationBytes, MixtureOfExpertsAddsTheRoutingWeightSumAndTheBalance) {
  ModelConfig moe = kModel;
  moe.num_local_experts = 4;
  moe.num_experts_per_tok = 2;
  const std::int64_t E = 4, k = 2, R = kB * kS;
  const auto extra = [&](const parallel::ParallelConfig& p, const char* axis) {
    const Moved dense = measure(kModel, p, kB, kS, axis), experts = measure(moe, p, kB, kS, axis);
    return std::pair{experts.all_reduce.calls - dense.all_reduce.calls,
                     experts.all_reduce.bytes_sent - dense.all_reduce.bytes_sent};
  };
  for (const bool seqpar : {false, true})
    EXPECT_EQ(extra(make_plan(1, 2, 1, seqpar), "tp"), std::pair(kL, kL * R * k * 8)) << seqpar;
  EXPECT_EQ(extra(make_plan(1, 1, 2), "sp"), std::pair(kL, kL * 2 * E * 8));
  EXPECT_EQ(extra(make_plan(1, 2, 2), "sp"), std::pair(kL, kL * 2 * E * 8));
  EXPECT_EQ(extra(make_plan(1, 2, 2), "tp"), std::pair(kL, kL * (R / 2) * k * 8));
}

// strategies/mesh/schedule.h is the planner's source for the baselines' traffic: on every rank,
// every (communicator, op) it lists equals the engine's calls and bytes under full recompute
// (the forward re-run in backward included), the engine sends nothing it omits (on tp, sp and
// dp), and each block's forward message has its backward conjugate in it. Degree 3 makes the
// target logits' all-reduce blocks unequal, so its bytes differ by rank.
struct MeshCase {
  const char* name;
  int tp, sp;
  bool seqpar;
};
void PrintTo(const MeshCase& c, std::ostream* os) { *os << c.name; }
class MeshSchedule : public testing::TestWithParam<MeshCase> {};

TEST_P(MeshSchedule, TrafficEqualsTheEngineAndEveryMessageHasItsConjugate) {
  const MeshCase mc = GetParam();
  constexpr std::int64_t B = 2, S = 24, L = 2;
  const int T = mc.tp;
  const ModelConfig model =
      T == 3 ? make_model(64, 48, 96, 6, 3, L) : make_model(64, 32, 64, 4, 2, L);
  const parallel::ParallelConfig p = make_plan(1, mc.tp, mc.sp, mc.seqpar);
  Case c;
  c.model = model;
  c.plan = p;
  c.batch = B;
  c.seq = S;
  const Data d = make_data(c, 1);
  const char* const axes[] = {"tp", "sp", "dp"};
  std::vector<std::map<std::string, comm::CommStats>> stats(static_cast<std::size_t>(p.world()));
  std::vector<int> tp_rank(static_cast<std::size_t>(p.world()));
  std::mutex m;
  comm::run_ranks(p.world(), [&](comm::Communicator& world) {
    kernels::set_thread_count(1);
    parallel::ParallelGroups groups(world, p);
    parallel::RankModel rank_model(model, groups, S, Recompute::Full, world.tracker(), kSeed);
    const parallel::LocalBatch b = rank_model.localize(micro_batch(c, d, 0, 0));
    for (const char* a : axes) groups.axis(a).reset_stats();
    rank_model.run(b, true, 1e-2);
    std::lock_guard lock(m);
    const auto r = static_cast<std::size_t>(world.rank());
    for (const char* a : axes) stats[r][a] = groups.axis(a).stats();
    tp_rank[r] = groups.tp().rank();
  });
  const parallel::MeshRankShapes shapes{.T = T,
                                        .S = mc.sp,
                                        .seqpar = mc.seqpar,
                                        .L = L,
                                        .h = model.hidden_size,
                                        .rows = B * S / mc.sp,
                                        .kvd = parallel::kv_heads_per_rank(model, T) *
                                               model.head_dim()};
  for (int rank = 0; rank < p.world(); ++rank) {
    SCOPED_TRACE(testing::Message() << "rank " << rank);
    const auto k = static_cast<std::size_t>(rank);
    const std::vector<parallel::MeshTraffic> traffic =
        parallel::mesh_traffic(shapes, 4, true, tp_rank[k]);
    std::map<std::pair<std::string, std::string>, std::pair<std::int64_t, std::int64_t>> want;
    for (const parallel::MeshTraffic& t : traffic) {
      auto& [calls, bytes] = want[{t.comm, t.op}];
      calls += t.calls;
      bytes += t.bytes;
    }
    for (const auto& [axis, got] : stats[k])
      for (const auto& [op, counts] : got.ops) {
        if (counts.calls == 0) continue;
        SCOPED_TRACE(axis + "/" + op);
        ASSERT_TRUE(want.count({axis, op})) << "the engine sends what schedule.h omits";
        EXPECT_EQ(counts.calls, want.at({axis, op}).first);
        EXPECT_EQ(counts.bytes_sent, want.at({axis, op}).second);
      }
    for (const auto& [key, counts] : want)
      EXPECT_EQ(stats[k].at(key.first).op(key.second).calls, counts.first)
          << key.first << "/" << key.second;
    const auto listed = [&](const char* block, const char* comm, const char* op, bool forward) {
      return std::any_of(traffic.begin(), traffic.end(), [&](const parallel::MeshTraffic& t) {
        return std::string(t.block) == block && std::string(t.comm) == comm &&
               std::string(t.op) == op && t.forward == forward && t.bytes > 0;
      });
    };
    const std::string tensor_layout = T == 1 ? "" : mc.seqpar ? "tpsp" : "tp";
    int pairs = 0;
    for (const parallel::MeshConjugatePair& q : parallel::kMeshConjugatePairs) {
      if (q.layout != tensor_layout && !(mc.sp > 1 && std::string(q.layout) == "sp")) continue;
      SCOPED_TRACE(std::string(q.layout) + " " + q.block);
      ++pairs;
      if (q.forward_comm != nullptr) {
        EXPECT_TRUE(listed(q.block, q.forward_comm, q.forward_op, true));
      }
      if (q.backward_comm != nullptr) {
        EXPECT_TRUE(listed(q.block, q.backward_comm, q.backward_op, false));
      }
    }
    EXPECT_GT(pairs, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Baselines, MeshSchedule,
                         testing::Values(MeshCase{"tp3", 3, 1, false},
                                         MeshCase{"tpsp3", 3, 1, true},
                                         MeshCase{"sp3", 1, 3, false},
                                         MeshCase{"tp2xsp2", 2, 2, false},
                                         MeshCase{"tpsp2xsp2", 2, 2, true}),
                         [](const testing::TestParamInfo<MeshCase>& i) { return i.param.name; });

}  // namespace
}  // namespace origami::parity
