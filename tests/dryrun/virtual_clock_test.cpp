// (c) The dry run's virtual clocks on schedules whose time can be worked out by hand: a single
// send, a ring all-gather over intra- and inter-node links, a kernel of known FLOPs, waits
// that join the clocks, and a collective overlapped with compute.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "origami/comm/run_ranks.h"
#include "origami/core/dry_run.h"
#include "origami/core/tensor.h"
#include "origami/kernels/attention.h"
#include "origami/kernels/gemm.h"

namespace origami {
namespace {

constexpr double kRate = 1e12;  // FLOP/s

// Virtual times are sums of a few doubles: equal up to rounding (relative 1e-12).
#define EXPECT_TIME(a, b) EXPECT_NEAR((a), (b), 1e-12 * std::abs(b))

comm::LinkModel link(int devices_per_node = 8) {
  comm::LinkModel l;
  l.enabled = true;
  l.intra_alpha_s = 1e-6;
  l.intra_beta_Bps = 1e9;
  l.inter_alpha_s = 1e-5;
  l.inter_beta_Bps = 1e8;
  l.devices_per_node = devices_per_node;
  return l;
}

// Runs fn on n ranks with unbacked trackers and a virtual clock each; returns the clocks.
std::vector<double> run_virtual(int n, const comm::LinkModel& l,
                                const std::function<void(comm::Communicator&)>& fn,
                                std::int64_t comm_elem_bytes = 4) {
  std::vector<std::unique_ptr<MemoryTracker>> owned;
  std::vector<MemoryTracker*> trackers;
  for (int r = 0; r < n; ++r) {
    owned.push_back(std::make_unique<MemoryTracker>());
    owned.back()->set_backs_memory(false);
    trackers.push_back(owned.back().get());
  }
  std::vector<double> clocks(static_cast<std::size_t>(n));
  comm::RunOptions ro;
  ro.link = l;
  ro.virtual_time = true;
  comm::run_ranks(
      trackers,
      [&](comm::Communicator& c) {
        dryrun::Clock clock;
        clock.flop_rate = kRate;
        clock.comm_elem_bytes = comm_elem_bytes;
        const dryrun::Install on(&clock);
        fn(c);
        clocks[static_cast<std::size_t>(c.rank())] = clock.now_s;
      },
      ro);
  return clocks;
}

// Unbacked buffers are null on every rank. A reduce-scatter must not take them for an
// in-place one on rank 0 alone (null + 0 == null): with blocks of 1.5 chunks the in-place and
// out-of-place algorithms send their messages in different orders, and the ranks' messages
// would not match (found by a TSP dry run at S = 24576 on the small model).
TEST(VirtualClock, UnbackedReduceScatterRunsTheSameAlgorithmOnEveryRank) {
  const std::int64_t block = 393216;  // 1.5 MiB of fp32
  run_virtual(4, link(), [&](comm::Communicator& c) {
    Tensor in(c.tracker(), MemCategory::CommBuffers, {4 * block});
    Tensor out(c.tracker(), MemCategory::CommBuffers, {block});
    ASSERT_FALSE(in.backed());
    c.reduce_scatter(in, out);
    EXPECT_EQ(c.stats().op("reduce_scatter").bytes_sent, 3 * block * 4);
  });
}

TEST(VirtualClock, OneSendTakesAlphaPlusBytesOverBeta) {
  const std::int64_t n = 1 << 20;  // floats
  const auto l = link();
  const auto clocks = run_virtual(2, l, [&](comm::Communicator& c) {
    Tensor t(c.tracker(), MemCategory::CommBuffers, {n});
    EXPECT_FALSE(t.backed());
    if (c.rank() == 0) c.send(t, 1, 0);
    if (c.rank() == 1) c.recv(t, 0, 0);
  });
  const double expect = l.intra_alpha_s + 4.0 * n / l.intra_beta_Bps;
  EXPECT_TIME(clocks[1], expect);
  EXPECT_TIME(clocks[0], expect);  // the send completes with the hop
}

TEST(VirtualClock, MessagesOnOneLinkShareItsBandwidth) {
  // Two messages posted together to one peer: the second starts when the first has left
  // (bytes / beta later), both pay alpha once: alpha + 2 n / beta for the second. A third to
  // another peer does not wait for them.
  const std::int64_t n = 1 << 16;
  const auto l = link();
  std::vector<double> done(3);
  run_virtual(3, l, [&](comm::Communicator& c) {
    Tensor a(c.tracker(), MemCategory::CommBuffers, {n}),
        b(c.tracker(), MemCategory::CommBuffers, {n});
    if (c.rank() == 0) {
      comm::Handle h1 = c.isend(a, 1, 0), h2 = c.isend(b, 1, 1), h3 = c.isend(a, 2, 0);
      h3.wait();
      done[2] = dryrun::current()->now_s;
      h1.wait();
      done[0] = dryrun::current()->now_s;
      h2.wait();
      done[1] = dryrun::current()->now_s;
    }
    if (c.rank() == 1) {
      c.recv(a, 0, 0);
      c.recv(b, 0, 1);
    }
    if (c.rank() == 2) c.recv(a, 0, 0);
  });
  const double one = l.intra_alpha_s + 4.0 * n / l.intra_beta_Bps;
  EXPECT_TIME(done[2], one);
  EXPECT_TIME(done[0], one);
  EXPECT_TIME(done[1], one + 4.0 * n / l.intra_beta_Bps);
}

TEST(VirtualClock, ProfileBytesSetTheHopTime) {
  const std::int64_t n = 1000;
  const auto l = link();
  const auto clocks = run_virtual(
      2, l,
      [&](comm::Communicator& c) {
        Tensor t(c.tracker(), MemCategory::CommBuffers, {n});
        if (c.rank() == 0) c.send(t, 1, 0);
        if (c.rank() == 1) c.recv(t, 0, 0);
        EXPECT_EQ(c.stats().total().bytes_sent + c.stats().total().bytes_received, 2 * n);
      },
      /*comm_elem_bytes=*/2);
  EXPECT_TIME(clocks[1], l.intra_alpha_s + 2.0 * n / l.intra_beta_Bps);
}

TEST(VirtualClock, KernelsChargeTheirFlopsAtTheRate) {
  const auto clocks = run_virtual(1, link(), [&](comm::Communicator&) {
    kernels::linear_forward(64, 128, 256, nullptr, nullptr, nullptr);  // 2·64·256·128
    const double after_gemm = dryrun::current()->now_s;
    EXPECT_TIME(after_gemm, 2.0 * 64 * 256 * 128 / kRate);
    // Causal attention over S positions 0..S-1: 4·d·H·B·S(S+1)/2 forward, 2.5x backward.
    const std::int64_t S = 100, H = 4, d = 8;
    std::vector<std::int64_t> pos(S);
    for (std::int64_t i = 0; i < S; ++i) pos[static_cast<std::size_t>(i)] = i;
    const kernels::AttentionShape s{
        .batch = 1, .q_len = S, .kv_len = S, .heads = H, .kv_heads = H, .head_dim = d};
    kernels::attention_forward(s, nullptr, nullptr, nullptr, pos.data(), pos.data(), 1.0f, nullptr,
                               nullptr);
    const double fwd = 4.0 * d * H * S * (S + 1) / 2;
    EXPECT_TIME(dryrun::current()->now_s - after_gemm, fwd / kRate);
    kernels::attention_backward(s, nullptr, nullptr, nullptr, pos.data(), pos.data(), 1.0f, nullptr,
                                nullptr, nullptr, nullptr, nullptr, nullptr);
    EXPECT_TIME(dryrun::current()->now_s - after_gemm, 3.5 * fwd / kRate);
    EXPECT_TIME(dryrun::current()->flops, 2.0 * 64 * 256 * 128 + 3.5 * fwd);
  });
  EXPECT_GT(clocks[0], 0);
}

TEST(VirtualClock, WaitsJoinTheClocks) {
  const std::int64_t n = 1000;
  const auto l = link();
  const double hop = l.intra_alpha_s + 4.0 * n / l.intra_beta_Bps;
  // Receiver late: it keeps its own clock. Sender late: the receiver waits for it.
  const auto late_receiver = run_virtual(2, l, [&](comm::Communicator& c) {
    Tensor t(c.tracker(), MemCategory::CommBuffers, {n});
    if (c.rank() == 0) c.send(t, 1, 0);
    if (c.rank() == 1) {
      dryrun::skip_kernel(kRate * 1.0);  // 1 s of compute
      c.recv(t, 0, 0);
    }
  });
  EXPECT_TIME(late_receiver[1], 1.0);
  EXPECT_TIME(late_receiver[0], hop);
  const auto late_sender = run_virtual(2, l, [&](comm::Communicator& c) {
    Tensor t(c.tracker(), MemCategory::CommBuffers, {n});
    if (c.rank() == 0) {
      dryrun::skip_kernel(kRate * 0.5);
      c.send(t, 1, 0);
    }
    if (c.rank() == 1) c.recv(t, 0, 0);
  });
  EXPECT_TIME(late_sender[1], 0.5 + hop);
  EXPECT_TIME(late_sender[0], 0.5 + hop);
}

TEST(VirtualClock, RingAllGatherStepsAtTheSlowestLinkOfEachRank) {
  const std::int64_t c_floats = 5000;  // per rank
  for (int per_node : {8, 2}) {
    const auto l = link(per_node);
    const auto clocks = run_virtual(4, l, [&](comm::Communicator& c) {
      Tensor in(c.tracker(), MemCategory::CommBuffers, {c_floats});
      Tensor out(c.tracker(), MemCategory::CommBuffers, {4 * c_floats});
      c.all_gather(in, out);
    });
    // 3 ring steps; with 2 devices per node every rank has one inter-node hop (0->1 and 2->3
    // intra, 1->2 and 3->0 inter) in each step, so every step takes the inter-node hop.
    const bool intra = per_node == 8;
    const double hop = intra ? l.intra_alpha_s + 4.0 * c_floats / l.intra_beta_Bps
                             : l.inter_alpha_s + 4.0 * c_floats / l.inter_beta_Bps;
    for (double t : clocks) EXPECT_NEAR(t, 3 * hop, 1e-15) << per_node;
  }
}

TEST(VirtualClock, ACollectiveOverlapsTheComputeIssuedAfterIt) {
  const std::int64_t n = 1 << 18;
  const auto l = link();
  const double gather = 1 * (l.intra_alpha_s + 4.0 * n / l.intra_beta_Bps);  // 2 ranks: one step
  for (double compute_s : {gather / 2, gather * 2}) {
    const auto clocks = run_virtual(2, l, [&](comm::Communicator& c) {
      Tensor in(c.tracker(), MemCategory::CommBuffers, {n});
      Tensor out(c.tracker(), MemCategory::CommBuffers, {2 * n});
      comm::Handle h = c.iall_gather(in, out);
      dryrun::skip_kernel(kRate * compute_s);
      h.wait();
    });
    for (double t : clocks) EXPECT_TIME(t, std::max(compute_s, gather));
  }
}

}  // namespace
}  // namespace origami
