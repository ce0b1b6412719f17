// TSP's communication per rank and layer equals the schedule's formula (docs/tsp.md), exactly,
// on every rank, at D = 2, 3 and 4 and at both recompute extremes; and its resident
// communication buffers stay within the per-phase resident set of docs/tsp.md. The per-rank
// bytes of each collective are those its algorithm's header states (comm/collectives/*.cpp):
// a chain broadcast is sent once by every rank but the last of the chain, a chain reduce once
// by every rank but the root, a ring all-gather / reduce-scatter of equal blocks c sends
// (D-1) c on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "origami/kernels/threads.h"
#include "origami/model/compute_copy.h"
#include "origami/model/driver.h"
#include "origami/parallel/strategies/tsp/schedule.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"
#include "threads_util.h"

namespace origami::parity {
namespace {
// Its own names (kB, Measured, ...) in a unity batch beside comm_bytes_test and memory_test.
namespace tsp_comm {

constexpr std::int64_t kB = 2, kS = 24, kL = 3;

// h 32 or 48, f 2h, heads and kv heads divisible by D; V 64 (padded to 66 at D = 3).
ModelConfig model_for(int D) {
  if (D == 3) return make_model(64, 48, 96, 6, 3, kL);
  if (D == 4) return make_model(64, 32, 64, 4, 4, kL);
  return make_model(64, 32, 64, 4, 2, kL);
}

struct Measured {
  std::vector<comm::CommStats> axis, shards, grads;  // per rank
  std::vector<std::int64_t> comm_buffers_peak;
  std::vector<std::int64_t> left_in_flight;  // prefetched layer after a step (-1: none)
  std::vector<std::int64_t> forward_peak;    // CommBuffers peak of a forward alone
  // The expert schedule's routing per rank and layer: the assignments that crossed the axis,
  // and all this rank's kept ones (to every owner, itself included).
  std::vector<std::vector<parallel::TspExpertRows>> expert_rows;
  std::vector<std::vector<std::int64_t>> expert_kept;
};

// `experts` > 0: model_for(D) with that many experts, top-2 (a mixture of experts), run by
// `schedule`. `bf16`: the linears read training's bf16 compute copy (model/compute_copy.h).
Measured measure(int D, Recompute recompute, std::int64_t experts = 0,
                 parallel::MoeSchedule schedule = parallel::MoeSchedule::Ring,
                 bool bf16 = false) {
  ModelConfig model = model_for(D);
  model.num_local_experts = experts;
  parallel::ParallelConfig p = make_tsp_plan(1, D);
  p.moe_schedule = schedule;
  Case c;
  c.model = model;
  c.plan = p;
  c.batch = kB;
  c.seq = kS;
  const Data d = make_data(c, 1);
  Measured out;
  out.axis.resize(static_cast<std::size_t>(D));
  out.shards.resize(static_cast<std::size_t>(D));
  out.grads.resize(static_cast<std::size_t>(D));
  out.comm_buffers_peak.resize(static_cast<std::size_t>(D));
  out.left_in_flight.resize(static_cast<std::size_t>(D));
  out.forward_peak.resize(static_cast<std::size_t>(D));
  out.expert_rows.resize(static_cast<std::size_t>(D));
  out.expert_kept.resize(static_cast<std::size_t>(D));
  std::mutex m;
  comm::run_ranks(D, [&](comm::Communicator& world) {
    kernels::set_thread_count(1);
    MemoryTracker& tracker = world.tracker();
    parallel::ParallelGroups groups(world, p);
    const parallel::Strategy strategy = parallel::tsp_strategy(model, groups);
    const parallel::TokenLayout layout(p.layout, kS, D, world.rank());
    ModelTensors params =
        parallel::allocate_sharded(model, strategy.specs, tracker, MemCategory::Parameters);
    ModelTensors grads =
        parallel::allocate_sharded(model, strategy.specs, tracker, MemCategory::Gradients);
    parallel::initialize_sharded(params, strategy.specs, model, kSeed);
    parallel::TspOps ops(model, groups, layout, params, grads, tracker);
    ModelTensors compute;
    if (bf16) {
      compute = allocate_compute_copy(params, tracker);
      refresh_compute_copy(params, compute);
      ops.set_compute_weights(&compute);
    }
    ModelDriver driver(model, params, grads, ops, tracker, recompute);
    const TokenBatch b = micro_batch(c, d, 0, 0);
    const parallel::LocalBatch local{kB, layout.slice(b.input_ids, kB), layout.slice(b.labels, kB)};
    groups.tsp().reset_stats();
    ops.shard_comm().reset_stats();
    ops.grad_comm().reset_stats();
    tracker.reset_peaks();
    ops.set_batch(&local);
    driver.run(true, 1e-2);
    // No prefetch outlives a step: not after a forward+backward, nor after a forward alone.
    std::int64_t left = ops.prefetched_layer();
    const comm::CommStats axis = groups.tsp().stats(), shards = ops.shard_comm().stats(),
                          grads_stats = ops.grad_comm().stats();
    const std::int64_t peak =
        tracker.stats().peak[static_cast<std::size_t>(MemCategory::CommBuffers)];
    tracker.reset_peaks();
    driver.run(false, 1e-2);
    left = std::max(left, ops.prefetched_layer());
    const std::int64_t forward_peak =
        tracker.stats().peak[static_cast<std::size_t>(MemCategory::CommBuffers)];
    ops.set_batch(nullptr);
    std::lock_guard lock(m);
    const auto r = static_cast<std::size_t>(world.rank());
    out.axis[r] = axis;
    out.shards[r] = shards;
    out.left_in_flight[r] = left;
    out.grads[r] = grads_stats;
    out.comm_buffers_peak[r] = peak;
    out.forward_peak[r] = forward_peak;
    if (schedule == parallel::MoeSchedule::Expert)
      for (std::int64_t l = 0; l < kL; ++l) {
        const parallel::TspOps::MoeExchange& ex = ops.moe_exchange(l);
        out.expert_rows[r].push_back(ex.rows(world.rank()));
        std::int64_t kept = 0;
        for (int q = 0; q < D; ++q) kept += ex.to(q);
        out.expert_kept[r].push_back(kept);
      }
  });
  return out;
}

struct Sizes {
  std::int64_t R, kvd, A, M, W;  // floats: rows, kv width, packed shards, head block
};
Sizes sizes_for(int D) {
  const ModelConfig m = model_for(D);
  const std::int64_t h = m.hidden_size, qd = h / D, kvd = m.kv_dim() / D;
  const std::int64_t Vp = (m.vocab_size + D - 1) / D * D;
  return {kB * kS / D, kvd, 2 * (qd + kvd) * h, 3 * (m.intermediate_size / D) * h, Vp / D * h};
}

TEST(TspCommunication, BytesPerRankEqualTheScheduleFormula) {
  for (int D : {2, 3, 4}) {
    for (Recompute r : {Recompute::None, Recompute::Full}) {
      const Measured m = measure(D, r);
      const auto [R, kvd, A, M, W] = sizes_for(D);
      // Full recompute re-runs each layer's forward (its communication included) in backward.
      const std::int64_t passes = r == Recompute::Full ? 3 : 2;  // attention passes per layer
      const std::int64_t fwd = passes - 1;
      for (int rank = 0; rank < D; ++rank) {
        SCOPED_TRACE(testing::Message() << "D=" << D << " recompute " << recompute_name(r)
                                        << " rank " << rank);
        const auto k = static_cast<std::size_t>(rank);
        // D broadcasts of A per layer and pass; every rank but the chain's last (the root's
        // predecessor) sends A: (D-1) A.
        EXPECT_EQ(m.shards[k].op("broadcast").bytes_sent, passes * kL * (D - 1) * A * 4);
        EXPECT_EQ(m.shards[k].op("broadcast").calls, passes * kL * D);
        // Ring hops: MLP M forward (D-1 hops); backward M weights D-1 hops + accumulator D
        // hops; the head W forward once, backward the same way.
        EXPECT_EQ(m.shards[k].op("send").bytes_sent,
                  (fwd * kL * (D - 1) * M + kL * (2 * D - 1) * M + (D - 1) * W +
                   (2 * D - 1) * W) *
                      4);
        // 2D K/V all-gathers per layer and pass, (D-1) R kvd each; 2D dK/dV reduce-scatters.
        EXPECT_EQ(m.axis[k].op("all_gather").bytes_sent,
                  passes * kL * 2 * D * (D - 1) * R * kvd * 4);
        EXPECT_EQ(m.axis[k].op("reduce_scatter").bytes_sent, kL * 2 * D * (D - 1) * R * kvd * 4);
        // Each head group's weight gradient reduced to its owner: every non-root sends A.
        EXPECT_EQ(m.grads[k].op("reduce").bytes_sent, kL * (D - 1) * A * 4);
        EXPECT_EQ(m.grads[k].op("reduce").calls, kL * D);
        EXPECT_EQ(m.axis[k].op("all_reduce").calls, 0);  // no activation all-reduce anywhere
        EXPECT_EQ(m.left_in_flight[k], -1);  // the last prefetch is never issued
      }
    }
  }
}

// Under training's bf16 compute copy every weight message and every K/V gather is half the
// bytes: the attention shards' broadcasts, the MLP's and the LM head's weight hops, the K/V
// all-gathers (K/V held in bf16, AttentionDims::kv); what carries gradients (the rings'
// accumulators, the head groups' reduces, the dK/dV reduce-scatters) stays fp32, as the policy
// states (core/precision.h).
TEST(TspCommunication, Bf16MovesEveryWeightAndTheKvAtHalfTheBytes) {
  for (int D : {2, 3}) {
    const Measured m = measure(D, Recompute::None, 0, parallel::MoeSchedule::Ring, true);
    const Measured f = measure(D, Recompute::None);
    const auto [R, kvd, A, M, W] = sizes_for(D);
    for (int rank = 0; rank < D; ++rank) {
      SCOPED_TRACE(testing::Message() << "D=" << D << " rank " << rank);
      const auto k = static_cast<std::size_t>(rank);
      EXPECT_EQ(2 * m.shards[k].op("broadcast").bytes_sent, f.shards[k].op("broadcast").bytes_sent);
      EXPECT_EQ(m.shards[k].op("broadcast").bytes_sent, 2 * kL * (D - 1) * A * 2);
      // Weight hops at 2 bytes (MLP forward and backward, head forward and backward),
      // accumulator hops at 4.
      const std::int64_t weight_hops = 2 * kL * (D - 1) * M + 2 * (D - 1) * W,
                         accumulator_hops = kL * D * M + D * W;
      EXPECT_EQ(m.shards[k].op("send").bytes_sent, weight_hops * 2 + accumulator_hops * 4);
      EXPECT_EQ(f.shards[k].op("send").bytes_sent, weight_hops * 4 + accumulator_hops * 4);
      EXPECT_EQ(2 * m.axis[k].op("all_gather").bytes_sent, f.axis[k].op("all_gather").bytes_sent);
      EXPECT_EQ(m.axis[k].op("all_gather").bytes_sent, 2 * kL * 2 * D * (D - 1) * R * kvd * 2);
      EXPECT_EQ(m.axis[k].op("reduce_scatter").bytes_sent,
                f.axis[k].op("reduce_scatter").bytes_sent);
      EXPECT_EQ(m.grads[k].op("reduce").bytes_sent, f.grads[k].op("reduce").bytes_sent);
    }
  }
}

// The shapes schedule.h's formulas take, for model_for(D).
parallel::TspRankShapes shapes_for(int D) {
  const ModelConfig m = model_for(D);
  return {.D = D, .L = kL, .h = m.hidden_size, .rows = kB * kS / D,
          .ffn = m.intermediate_size / D};
}

// docs/moe.md "Bytes per rank per layer": every expert's shard rides the dense MLP's ring
// (schedule.h tsp_moe_ring_*_bytes, M_E = E x M); the only other traffic MoE adds is the
// balance's all-reduce of 2E doubles on the axis, once per layer and forward pass.
TEST(TspCommunication, MixtureOfExpertsRingBytesEqualTheFormula) {
  constexpr std::int64_t kExperts = 3;  // not a multiple of D: the ring takes any E
  for (int D : {2, 4}) {
    for (Recompute r : {Recompute::None, Recompute::Full}) {
      const Measured m = measure(D, r, kExperts);
      const auto [R, kvd, A, M, W] = sizes_for(D);
      const parallel::TspRankShapes s = shapes_for(D);
      const std::int64_t fwd = r == Recompute::Full ? 2 : 1;  // forward passes per layer
      const std::int64_t moe = fwd * parallel::tsp_moe_ring_forward_bytes(s, kExperts, 4) +
                               parallel::tsp_moe_ring_backward_bytes(s, kExperts, 4);
      EXPECT_EQ(moe, (fwd * (D - 1) + 2 * D - 1) * kExperts * M * 4);  // M_E = E x M
      for (int rank = 0; rank < D; ++rank) {
        SCOPED_TRACE(testing::Message() << "D=" << D << " recompute " << recompute_name(r)
                                        << " rank " << rank);
        const auto k = static_cast<std::size_t>(rank);
        EXPECT_EQ(m.shards[k].op("send").bytes_sent,
                  kL * moe + ((D - 1) * W + (2 * D - 1) * W) * 4);
        EXPECT_EQ(m.axis[k].op("all_reduce").calls, fwd * kL);
        EXPECT_EQ(m.left_in_flight[k], -1);
      }
    }
  }
}

// docs/moe.md "The expert schedule": the weights never move (no ring hop carries an expert);
// the axis' all-to-all bytes beyond the embedding's (the ring run's, on the same ids) equal
// schedule.h's tsp_moe_expert_*_bytes for the routing that happened (each rank's counts), at
// every recompute policy; the counts are consistent (every kept assignment sent once, what
// one rank sends another receives).
TEST(TspCommunication, MixtureOfExpertsExpertScheduleBytesEqualTheFormula) {
  constexpr std::int64_t kExperts = 4, kTopK = 2;
  for (int D : {2, 4}) {
    for (Recompute r : {Recompute::None, Recompute::Mlp, Recompute::Full}) {
      const Measured ring = measure(D, r, kExperts);
      const Measured m = measure(D, r, kExperts, parallel::MoeSchedule::Expert);
      const auto [R, kvd, A, M, W] = sizes_for(D);
      const parallel::TspRankShapes s = shapes_for(D);
      const std::int64_t fwd = r == Recompute::Full ? 2 : 1;
      const bool saved = r == Recompute::None || r == Recompute::Full;
      std::int64_t sent_total = 0, received_total = 0;
      for (int rank = 0; rank < D; ++rank) {
        SCOPED_TRACE(testing::Message() << "D=" << D << " recompute " << recompute_name(r)
                                        << " rank " << rank);
        const auto k = static_cast<std::size_t>(rank);
        std::int64_t bytes = 0;
        for (std::int64_t l = 0; l < kL; ++l) {
          const parallel::TspExpertRows rows = m.expert_rows[k][static_cast<std::size_t>(l)];
          EXPECT_EQ(m.expert_kept[k][static_cast<std::size_t>(l)], R * kTopK);  // dropless
          sent_total += rows.sent;
          received_total += rows.received;
          bytes += fwd * parallel::tsp_moe_expert_forward_bytes(s, kExperts, rows, 4) +
                   parallel::tsp_moe_expert_backward_bytes(s, rows, 4, saved);
        }
        const comm::OpStats& all = m.axis[k].op("all_to_all");
        const comm::OpStats& embedding = ring.axis[k].op("all_to_all");
        EXPECT_EQ(all.bytes_sent - embedding.bytes_sent, bytes);
        EXPECT_EQ(all.calls - embedding.calls,
                  kL * (fwd * parallel::kTspExpertForwardCalls +
                        parallel::tsp_moe_expert_backward_calls(saved)));
        // Only the head's vocabulary ring hops: no expert weight moves.
        EXPECT_EQ(m.shards[k].op("send").bytes_sent, ((D - 1) * W + (2 * D - 1) * W) * 4);
        EXPECT_EQ(m.axis[k].op("all_reduce").calls, fwd * kL);  // the balance, as the ring's
      }
      EXPECT_EQ(sent_total, received_total) << "D=" << D;
      EXPECT_GT(sent_total, 0) << "D=" << D;  // rows did cross the axis
    }
  }
}

// docs/tsp.md "Resident set per phase": the largest phase bounds the CommBuffers peak, and the
// deterministic part of the attention backward's (everything but the dP_j reduce's staging,
// whose overlap with other buffers depends on timing) is reached.
TEST(TspMemory, CommunicationBuffersWithinTheStatedBound) {
  for (int D : {2, 3, 4}) {
    for (Recompute r : {Recompute::None, Recompute::Full}) {
      SCOPED_TRACE(testing::Message() << "D=" << D << " recompute " << recompute_name(r));
      const Measured m = measure(D, r);
      const auto [R, kvd, A, M, W] = sizes_for(D);
      const std::int64_t c = R * kvd, h = model_for(D).hidden_size;
      const std::int64_t kv_bwd = std::max({3 * D - 1, 4 * D - 4, 2 * D + 2}) * c;
      // Two shards; group j+1's gathers started before group j's are waited (5D-1)c.
      const std::int64_t attention_fwd = 2 * A + (5 * D - 1) * c;
      // Shards 2A, local dP_j x min(D, 3) and the summed dP_r, the next group's re-gather
      // 2Dc, the current group's K/V peak; + the dP reduce's staging (A here) depending on
      // timing.
      const std::int64_t attention_bwd = (3 + std::min(D, 3)) * A + 2 * D * c + kv_bwd;
      const std::int64_t mlp = 5 * M + 2 * A;  // + the next attention call's P_0, P_1
      const std::int64_t head = 5 * W;
      const std::int64_t embedding = 2 * R * h;  // ids are spread evenly over the vocabulary
      const std::int64_t bound =
          std::max({attention_fwd, attention_bwd + A, mlp, head, embedding}) * 4;
      for (int rank = 0; rank < D; ++rank) {
        const std::int64_t peak = m.comm_buffers_peak[static_cast<std::size_t>(rank)];
        EXPECT_LE(peak, bound) << "rank " << rank;
        EXPECT_GE(peak, attention_bwd * 4) << "rank " << rank;
        // A forward alone: exactly its largest phase (here the MLP's, which holds the next
        // layer's prefetched P_0 and P_1).
        EXPECT_EQ(m.forward_peak[static_cast<std::size_t>(rank)],
                  std::max({attention_fwd, 2 * M + 2 * A, 2 * W}) * 4)
            << "rank " << rank;
      }
    }
  }
}

// strategies/tsp/schedule.h is the planner's source for TSP's traffic: every (communicator,
// op) it lists equals the engine's calls and bytes on every rank (the embedding's all-to-all
// bytes depend on the ids: calls only), nothing the engine sends is missing from it, and each
// block's forward message has its backward conjugate in it.
TEST(TspSchedule, TrafficEqualsTheEngineAndEveryMessageHasItsConjugate) {
  constexpr int D = 3;
  const Measured m = measure(D, Recompute::Full);
  const ModelConfig model = model_for(D);
  const std::int64_t h = model.hidden_size;
  const parallel::TspRankShapes s{.D = D,
                                  .L = kL,
                                  .h = h,
                                  .rows = kB * kS / D,
                                  .heads = model.num_attention_heads / D,
                                  .qd = h / D,
                                  .kvd = model.kv_dim() / D,
                                  .ffn = model.intermediate_size / D,
                                  .vocab_rows = (model.vocab_size + D - 1) / D};
  const std::vector<parallel::TspTraffic> traffic = parallel::tsp_traffic(s, 4, true);
  std::map<std::pair<std::string, std::string>, std::pair<std::int64_t, std::int64_t>> want;
  for (const parallel::TspTraffic& t : traffic) {
    auto& [calls, bytes] = want[{t.comm, t.op}];
    calls += t.calls;
    bytes += t.bytes;
  }
  for (int rank = 0; rank < D; ++rank) {
    SCOPED_TRACE(testing::Message() << "rank " << rank);
    const auto k = static_cast<std::size_t>(rank);
    const std::map<std::string, const comm::CommStats*> engine = {
        {parallel::kTspAxis, &m.axis[k]},
        {parallel::kTspShards, &m.shards[k]},
        {parallel::kTspGrads, &m.grads[k]}};
    for (const auto& [comm_name, stats] : engine)
      for (const auto& [op, got] : stats->ops) {
        SCOPED_TRACE(comm_name + "/" + op);
        ASSERT_TRUE(want.count({comm_name, op})) << "the engine sends what schedule.h omits";
        const auto [calls, bytes] = want.at({comm_name, op});
        EXPECT_EQ(got.calls, calls);
        if (op != "all_to_all") {
          EXPECT_EQ(got.bytes_sent, bytes);
        }
      }
    for (const auto& [key, counts] : want)
      EXPECT_EQ(engine.at(key.first)->op(key.second).calls, counts.first)
          << key.first << "/" << key.second;
  }
  const auto listed = [&](const char* block, const char* comm, const char* op, bool forward) {
    return std::any_of(traffic.begin(), traffic.end(), [&](const parallel::TspTraffic& t) {
      return std::string(t.block) == block && std::string(t.comm) == comm &&
             std::string(t.op) == op && t.forward == forward && t.bytes > 0;
    });
  };
  for (const parallel::TspConjugatePair& p : parallel::kTspConjugatePairs) {
    SCOPED_TRACE(p.block);
    EXPECT_TRUE(listed(p.block, p.forward_comm, p.forward_op, true));
    EXPECT_TRUE(listed(p.block, p.backward_comm, p.backward_op, false));
  }
}

}  // namespace tsp_comm
}  // namespace
}  // namespace origami::parity
