// TSP's allgather schedule moves exactly what its schedule.h says, per rank and layer, on
// every rank, at D = 2, 3 and 4 and at both recompute extremes; nothing stays in flight after
// a step or a forward alone; its communication buffers stay within schedule.h's resident set.
// The engine is built through the registry (make_strategy on a plan with tsp_schedule
// allgather), so the test also checks that the plan selects these blocks.
#include <gtest/gtest.h>

#include <mutex>

#include "origami/kernels/threads.h"
#include "origami/model/driver.h"
#include "origami/parallel/registry.h"
#include "origami/parallel/strategies/tsp_allgather/allgather_ops.h"
#include "origami/parallel/strategies/tsp_allgather/schedule.h"
#include "threads_util.h"

namespace origami::parity {
namespace {

namespace ag = parallel::tsp_allgather;

constexpr std::int64_t kBatch = 2, kSeq = 24, kLayers = 3;

// h 32 or 48, f 2h, heads and kv heads dividing D (at D = 4 also the replicated kv heads'
// case: 4 heads over 2 kv heads); V 64 (padded to 66 at D = 3).
ModelConfig allgather_model(int D) {
  if (D == 3) return make_model(64, 48, 96, 6, 3, kLayers);
  return make_model(64, 32, 64, 4, 2, kLayers);
}

struct RankTraffic {
  comm::CommStats axis, shards, grads;
  std::int64_t comm_peak = 0, forward_comm_peak = 0;
  bool left_in_flight = false;
};

std::vector<RankTraffic> run_allgather_step(int D, Recompute recompute) {
  const ModelConfig model = allgather_model(D);
  parallel::ParallelConfig p = make_tsp_plan(1, D);
  p.tsp_schedule = parallel::TspSchedule::Allgather;
  Case c;
  c.model = model;
  c.plan = p;
  c.batch = kBatch;
  c.seq = kSeq;
  const Data data = make_data(c, 1);
  std::vector<RankTraffic> out(static_cast<std::size_t>(D));
  std::mutex m;
  comm::run_ranks(D, [&](comm::Communicator& world) {
    kernels::set_thread_count(1);
    MemoryTracker& tracker = world.tracker();
    parallel::ParallelGroups groups(world, p);
    const parallel::Strategy strategy = parallel::make_strategy(model, groups);
    const parallel::TokenLayout layout(p.layout, kSeq, D, world.rank());
    ModelTensors params =
        parallel::allocate_sharded(model, strategy.specs, tracker, MemCategory::Parameters);
    ModelTensors grads =
        parallel::allocate_sharded(model, strategy.specs, tracker, MemCategory::Gradients);
    parallel::initialize_sharded(params, strategy.specs, model, kSeed);
    std::unique_ptr<parallel::StrategyOps> made =
        strategy.make_ops(model, groups, layout, params, grads, tracker);
    auto* ops = dynamic_cast<parallel::TspAllgatherOps*>(made.get());
    ASSERT_NE(ops, nullptr) << "tsp_schedule allgather did not select TspAllgatherOps";
    ModelDriver driver(model, params, grads, *ops, tracker, recompute);
    const TokenBatch b = micro_batch(c, data, 0, 0);
    const parallel::LocalBatch local{kBatch, layout.slice(b.input_ids, kBatch),
                                     layout.slice(b.labels, kBatch)};
    RankTraffic t;
    groups.tsp().reset_stats();
    ops->shard_comm().reset_stats();
    ops->grad_comm().reset_stats();
    tracker.reset_peaks();
    ops->set_batch(&local);
    driver.run(true, 1e-2);
    t.left_in_flight = ops->in_flight();
    t.axis = groups.tsp().stats();
    t.shards = ops->shard_comm().stats();
    t.grads = ops->grad_comm().stats();
    t.comm_peak = tracker.stats().peak[static_cast<std::size_t>(MemCategory::CommBuffers)];
    tracker.reset_peaks();
    driver.run(false, 1e-2);
    t.left_in_flight = t.left_in_flight || ops->in_flight();
    t.forward_comm_peak = tracker.stats().peak[static_cast<std::size_t>(MemCategory::CommBuffers)];
    ops->set_batch(nullptr);
    std::lock_guard lock(m);
    out[static_cast<std::size_t>(world.rank())] = t;
  });
  return out;
}

TEST(TspAllgatherCommunication, BytesPerRankEqualItsScheduleHeader) {
  for (int D : {2, 3, 4}) {
    for (Recompute r : {Recompute::None, Recompute::Full}) {
      const std::vector<RankTraffic> measured = run_allgather_step(D, r);
      const ModelConfig model = allgather_model(D);
      const ag::Shapes s = ag::shapes(model, D, kBatch, kSeq);
      // Full recompute re-runs each layer's forward, its gathers included, in the backward.
      const std::int64_t passes = r == Recompute::Full ? 3 : 2;
      const std::int64_t W = parallel::padded_vocab(model.vocab_size, D) / D * model.hidden_size;
      for (int rank = 0; rank < D; ++rank) {
        SCOPED_TRACE(testing::Message()
                     << "D=" << D << " recompute " << recompute_name(r) << " rank " << rank);
        const RankTraffic& t = measured[static_cast<std::size_t>(rank)];
        EXPECT_EQ(t.shards.op("all_gather").bytes_sent,
                  passes * kLayers * ag::weight_gather_floats(s) * 4);
        EXPECT_EQ(t.shards.op("all_gather").calls, passes * kLayers * ag::weight_gather_calls());
        EXPECT_EQ(t.grads.op("reduce_scatter").bytes_sent,
                  kLayers * ag::weight_reduce_scatter_floats(s) * 4);
        EXPECT_EQ(t.axis.op("all_gather").bytes_sent,
                  passes * kLayers * ag::kv_gather_floats(s) * 4);
        EXPECT_EQ(t.axis.op("all_gather").calls, passes * kLayers * ag::kv_gather_calls(s));
        EXPECT_EQ(t.axis.op("reduce_scatter").bytes_sent,
                  kLayers * ag::kv_reduce_scatter_floats(s) * 4);
        // No broadcast, no MLP ring: the shard communicator's sends are the LM head's ring
        // (TSP's: (D-1) W forward, (2D-1) W backward).
        EXPECT_EQ(t.shards.op("broadcast").calls, 0);
        EXPECT_EQ(t.grads.op("reduce").calls, 0);
        EXPECT_EQ(t.shards.op("send").bytes_sent, ((D - 1) * W + (2 * D - 1) * W) * 4);
        EXPECT_EQ(t.axis.op("all_reduce").calls, 0);
        EXPECT_FALSE(t.left_in_flight);
      }
    }
  }
}

// schedule.h's resident set: a forward alone holds exactly its largest phase (here the
// attention's: the whole weight, MLP l's in flight, one group's K/V), a step at most the
// largest of its backward phases and TSP's LM-head and embedding phases (the reduce-scatters'
// staging overlaps the rest or not depending on timing).
TEST(TspAllgatherMemory, CommunicationBuffersWithinItsScheduleHeader) {
  for (int D : {2, 3, 4}) {
    for (Recompute r : {Recompute::None, Recompute::Full}) {
      SCOPED_TRACE(testing::Message() << "D=" << D << " recompute " << recompute_name(r));
      const std::vector<RankTraffic> measured = run_allgather_step(D, r);
      const ModelConfig model = allgather_model(D);
      const ag::Shapes s = ag::shapes(model, D, kBatch, kSeq);
      const std::int64_t W = parallel::padded_vocab(model.vocab_size, D) / D * model.hidden_size;
      const std::int64_t head = 5 * W, embedding = 2 * s.rows * model.hidden_size;
      for (int rank = 0; rank < D; ++rank) {
        const RankTraffic& t = measured[static_cast<std::size_t>(rank)];
        EXPECT_EQ(t.forward_comm_peak, std::max(ag::forward_peak(s), 2 * W) * 4) << "rank " << rank;
        EXPECT_LE(t.comm_peak,
                  std::max({ag::backward_peak(s, r == Recompute::Full, model.num_hidden_layers), head,
                            embedding}) * 4)
            << "rank " << rank;
        EXPECT_GE(t.comm_peak, ag::forward_peak(s) * 4) << "rank " << rank;
      }
    }
  }
}

}  // namespace
}  // namespace origami::parity
