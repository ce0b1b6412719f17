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

#include "origami/kernels/threads.h"
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

}  // namespace
}  // namespace origami::parity
