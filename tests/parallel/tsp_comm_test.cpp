// TSP's communication per rank and layer equals the schedule's formula (docs/tsp.md), exactly,
// and its resident communication buffers stay within the stated bound. One forward+backward
// at D = 2 (where every collective's traffic per rank is exact: a broadcast's root sends the
// buffer once, a reduce's non-root sends it once, an all-gather / reduce-scatter sends the
// other rank's half) on a model with h 32, 3 layers, 4 heads over 2 kv heads, f 64, V 64.
#include <gtest/gtest.h>

#include "origami/kernels/threads.h"
#include "origami/model/driver.h"
#include "origami/parallel/tsp_ops.h"
#include "threads_util.h"

namespace origami::parity {
namespace {

const ModelConfig kModel = make_model(64, 32, 64, 4, 2, 3);
constexpr std::int64_t kB = 2, kS = 16, kL = 3, kH = 32, kF = 64, kV = 64, kD = 2;

struct Measured {
  comm::CommStats axis, shards;
  std::int64_t comm_buffers_peak = 0;
};

Measured measure(Recompute recompute) {
  parallel::ParallelConfig p = make_plan(1, 1, kD);
  p.tsp = true;
  Case c;
  c.model = kModel;
  c.plan = p;
  c.batch = kB;
  c.seq = kS;
  const Data d = make_data(c, 1);
  Measured out;
  comm::run_ranks(kD, [&](comm::Communicator& world) {
    kernels::set_thread_count(1);
    MemoryTracker& tracker = world.tracker();
    parallel::ParallelGroups groups(world, p);
    const parallel::Strategy strategy = parallel::tsp_strategy(kModel, groups);
    const parallel::TokenLayout layout(p.layout, kS, kD, world.rank());
    ModelTensors params =
        parallel::allocate_sharded(kModel, strategy.specs, tracker, MemCategory::Parameters);
    ModelTensors grads =
        parallel::allocate_sharded(kModel, strategy.specs, tracker, MemCategory::Gradients);
    parallel::initialize_sharded(params, strategy.specs, kModel, kSeed);
    parallel::TspOps ops(kModel, groups, layout, params, grads, tracker);
    ModelDriver driver(kModel, params, grads, ops, tracker, recompute);
    const TokenBatch b = micro_batch(c, d, 0, 0);
    const parallel::LocalBatch local{kB, layout.slice(b.input_ids, kB), layout.slice(b.labels, kB)};
    groups.sp().reset_stats();
    ops.shard_comm().reset_stats();
    tracker.reset_peaks();
    ops.set_batch(&local);
    driver.run(true, 1e-2);
    ops.set_batch(nullptr);
    if (world.rank() == 0) {
      out.axis = groups.sp().stats();
      out.shards = ops.shard_comm().stats();
      out.comm_buffers_peak =
          tracker.stats().peak[static_cast<std::size_t>(MemCategory::CommBuffers)];
    }
  });
  return out;
}

TEST(TspCommunication, BytesPerRankEqualTheScheduleFormula) {
  for (Recompute r : {Recompute::None, Recompute::Full}) {
    const Measured m = measure(r);
    const std::int64_t R = kB * kS / kD;                          // the rank's token rows
    const std::int64_t qd = kH / kD, kvd = kModel.kv_dim() / kD;  // head group widths
    const std::int64_t A = 2 * (qd + kvd) * kH;                   // packed attention shard
    const std::int64_t M = 3 * (kF / kD) * kH;                    // packed MLP shard
    const std::int64_t W = kV / kD * kH;                          // LM head block
    // Full recompute re-runs each layer's forward (its communication included) in backward.
    const std::int64_t fwd = r == Recompute::Full ? 2 : 1;
    // Broadcasts: each rank roots its own attention shard once per forward and per backward.
    EXPECT_EQ(m.shards.op("broadcast").bytes_sent, (fwd + 1) * kL * A * 4);
    EXPECT_EQ(m.shards.op("broadcast").calls, (fwd + 1) * kL * kD);
    // Ring hops (D-1 per ring): MLP M forward, [M | dM] backward + the accumulator's last hop;
    // the head W forward, [W | dW] backward + its last hop.
    EXPECT_EQ(m.shards.op("send").bytes_sent,
              (fwd * kL * (kD - 1) * M + kL * ((kD - 1) * 2 * M + M) + (kD - 1) * W +
               ((kD - 1) * 2 * W + W)) *
                  4);
    // K/V all-gathers per head group (forward, and again in backward); dK/dV reduce-scatters.
    EXPECT_EQ(m.axis.op("all_gather").bytes_sent, (fwd + 1) * kL * kD * 2 * R * kvd * 4);
    EXPECT_EQ(m.axis.op("reduce_scatter").bytes_sent, kL * kD * 2 * R * kvd * 4);
    // Each head group's weight gradient reduced to its owner: sent by the D-1 others.
    EXPECT_EQ(m.axis.op("reduce").bytes_sent, kL * (kD - 1) * A * 4);
    EXPECT_EQ(m.axis.op("all_reduce").calls, 0);  // no activation all-reduce anywhere
  }
}

TEST(TspMemory, CommunicationBuffersWithinTheStatedBound) {
  const Measured m = measure(Recompute::None);
  const std::int64_t R = kB * kS / kD, h = kH;
  const std::int64_t qd = kH / kD, kvd = kModel.kv_dim() / kD;
  const std::int64_t A = 2 * (qd + kvd) * kH, M = 3 * (kF / kD) * kH, W = kV / kD * kH;
  // docs/tsp.md: attention backward holds two shard buffers, the local and summed gradient
  // shards, the gathered K/V and their gradients (4 x D*R*kvd) and the reduce-scatter staging
  // (D*R*kvd); the MLP's backward two [M | dM]; the head's two [W | dW]; the embedding 2 R h.
  const std::int64_t attention = 4 * A + 5 * kD * R * kvd;
  const std::int64_t bound = std::max({attention, 4 * M, 4 * W, 2 * R * h}) * 4;
  EXPECT_GT(m.comm_buffers_peak, 0);
  EXPECT_LE(m.comm_buffers_peak, bound);
}

}  // namespace
}  // namespace origami::parity
