// Every operation on the threads transport for 1..8 ranks, sync and async, zero and odd
// sizes, with closed-form answers; measured bytes equal each algorithm's formula.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "checks.h"
#include "origami/comm/collectives/bytes_sent.h"
#include "origami/comm/run_ranks.h"
#include "origami/core/bf16.h"

namespace origami::comm {
namespace {

class ThreadsWorldSize : public ::testing::TestWithParam<int> {};

TEST_P(ThreadsWorldSize, EveryOperationGivesTheClosedFormAnswer) {
  run_ranks(GetParam(), [](Communicator& c) { testing::check_everything(c); });
}

TEST_P(ThreadsWorldSize, MeasuredBytesEqualTheFormulas) {
  run_ranks(GetParam(), [](Communicator& c) { testing::check_bytes_equal_formulas(c); });
}

TEST_P(ThreadsWorldSize, StagingIsAccountedAsCommBuffersAndReleased) {
  const int n = GetParam();
  std::vector<std::unique_ptr<MemoryTracker>> owned;
  std::vector<MemoryTracker*> trackers;
  for (int r = 0; r < n; ++r) {
    owned.push_back(std::make_unique<MemoryTracker>());
    trackers.push_back(owned.back().get());
  }
  run_ranks(trackers, [](Communicator& c) { testing::check_reduce_scatter(c, 1001, false); });
  for (auto* t : trackers) {
    EXPECT_EQ(t->current(MemCategory::CommBuffers), 0);
    const auto counts = balanced_counts(1001, n);
    // Reduce-scatter stages two chunk slots of min(1 MiB, largest block) (none for one rank).
    EXPECT_EQ(t->peak(MemCategory::CommBuffers), n == 1 ? 0 : 2 * counts[0] * 4);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, ThreadsWorldSize, ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8));

// The per-rank bytes the schedules and the planner use (bytes_sent.h) are the ones the
// algorithms measurably send (checks.h's costs, held to the measured bytes above).
TEST(BytesSent, TheSchedulesFormulasEqualTheMeasuredCosts) {
  for (int n : {1, 2, 3, 4, 7})
    for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{3 * n + 2}, std::int64_t{1001}})
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(ring_all_reduce_sent(count, n, r, 4), testing::ring_all_reduce_cost(count, 4, n, r).sent)
            << n << " " << count << " " << r;
        const std::vector<std::int64_t> blocks(static_cast<std::size_t>(n), count * 2);
        EXPECT_EQ(ring_blocks_sent(count * 2, n), testing::ring_all_gather_cost(blocks, r).sent);
        EXPECT_EQ(ring_blocks_sent(count * 2, n), testing::ring_reduce_scatter_cost(blocks, r).sent);
      }
}

TEST(ThreadsCollectives, BytesAreExactForBf16Moves) {
  run_ranks(3, [](Communicator& c) {
    std::vector<std::uint16_t> in(5, static_cast<std::uint16_t>(c.rank() + 1)), out(15, 0);
    c.all_gather(ConstBuffer(in.data(), 5, DType::BF16), Buffer(out.data(), 15, DType::BF16));
    for (int k = 0; k < 3; ++k) EXPECT_EQ(out[5 * k + 4], k + 1);
    EXPECT_EQ(c.stats().op("all_gather").bytes_sent, 2 * 5 * 2);
  });
}

// bf16 sums (gradients under --grad-reduce-dtype bf16): every rank ends with the same bits; each
// element is within p - 1 roundings of the exact sum of the bf16 inputs (each hop adds in fp32
// and rounds once: relative 2^-8 each); an in-place reduce-scatter leaves the all-reduce's block
// bit for bit; half the bytes of the fp32 all-reduce's formula.
TEST(ThreadsCollectives, Bf16SumsAgreeOnEveryRankWithinTheirRoundings) {
  for (const int p : {2, 3, 5}) {
    std::vector<std::vector<bf16>> got(static_cast<std::size_t>(p));
    std::vector<std::vector<bf16>> scattered(static_cast<std::size_t>(p));
    const std::int64_t n = 1003;
    auto input = [](int rank, std::int64_t i) {
      return to_bf16(std::sin(0.37f * static_cast<float>(i) + static_cast<float>(rank)) *
                     std::ldexp(1.0f, static_cast<int>(i % 11) - 5));
    };
    run_ranks(p, [&](Communicator& c) {
      std::vector<bf16> x(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = input(c.rank(), i);
      std::vector<bf16> y = x;
      c.all_reduce(ConstBuffer(x.data(), n, DType::BF16), Buffer(x.data(), n, DType::BF16));
      EXPECT_EQ(c.stats().op("all_reduce").bytes_sent, ring_all_reduce_sent(n, p, c.rank(), 2));
      const auto counts = balanced_counts(n, p);
      std::int64_t off = 0;
      for (int r = 0; r < c.rank(); ++r) off += counts[static_cast<std::size_t>(r)];
      const Buffer mine(y.data() + off, counts[static_cast<std::size_t>(c.rank())], DType::BF16);
      c.reduce_scatter(ConstBuffer(y.data(), n, DType::BF16), mine);
      got[static_cast<std::size_t>(c.rank())] = x;
      scattered[static_cast<std::size_t>(c.rank())].assign(
          y.begin() + off, y.begin() + off + counts[static_cast<std::size_t>(c.rank())]);
    });
    std::int64_t off = 0;
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(got[static_cast<std::size_t>(r)], got[0]) << "rank " << r << " of " << p;
      const std::vector<bf16>& s = scattered[static_cast<std::size_t>(r)];
      EXPECT_TRUE(std::equal(s.begin(), s.end(), got[0].begin() + off)) << "rank " << r;
      off += static_cast<std::int64_t>(s.size());
    }
    for (std::int64_t i = 0; i < n; ++i) {
      double exact = 0, magnitude = 0;
      for (int r = 0; r < p; ++r) {
        exact += to_float(input(r, i));
        magnitude += std::abs(to_float(input(r, i)));
      }
      const double bound = (p - 1) * std::ldexp(1.0, -8) * magnitude;
      EXPECT_LE(std::abs(to_float(got[0][static_cast<std::size_t>(i)]) - exact), bound)
          << "element " << i << " of " << p << " ranks";
    }
  }
}

TEST(ThreadsCollectives, TensorOverloadsAndGatherStats) {
  run_ranks(3, [](Communicator& c) {
    Tensor t(c.tracker(), MemCategory::Gradients, {4, 3});
    for (auto& x : t.span()) x = static_cast<float>(c.rank());
    c.all_reduce(t, t);
    for (float x : t.span()) EXPECT_EQ(x, 3.0f);
    const auto mine = c.stats().op("all_reduce");
    EXPECT_GT(mine.time_s, 0.0);
    EXPECT_GE(mine.exposed_s, 0.0);
    // Exposed time also counts the waiter's wake-up after completion, so it may exceed time_s.
    EXPECT_LT(mine.exposed_s, mine.time_s + 0.5);
    EXPECT_EQ(mine.messages_sent, 2 * (3 - 1));
    auto all = c.gather_stats();
    if (c.rank() == 0) {
      ASSERT_EQ(all.size(), 3u);
      for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(all[r].rank, r);
        EXPECT_EQ(all[r].op("all_reduce").calls, 1);
        EXPECT_EQ(all[r].op("all_reduce").bytes_sent, testing::ring_all_reduce_cost(12, 4, 3, r).sent);
      }
      EXPECT_NE(all[1].summary().find("all_reduce"), std::string::npos);
    } else {
      EXPECT_TRUE(all.empty());
    }
  });
}

TEST(ThreadsCollectives, InPlaceReduceScatterUsesOwnBlock) {
  run_ranks(4, [](Communicator& c) {
    std::vector<float> buf(10);
    for (int i = 0; i < 10; ++i) buf[i] = static_cast<float>(i * (c.rank() + 1));
    const auto counts = balanced_counts(10, 4);  // 3 3 2 2
    std::int64_t off = 0;
    for (int k = 0; k < c.rank(); ++k) off += counts[k];
    c.reduce_scatter(ConstBuffer(buf), Buffer(buf.data() + off, counts[c.rank()], DType::F32));
    for (std::int64_t i = 0; i < counts[c.rank()]; ++i) EXPECT_EQ(buf[off + i], static_cast<float>((off + i) * 10));
  });
}

TEST(ThreadsCollectives, ThenRunsAfterCompletionWithoutAWait) {
  run_ranks(2, [](Communicator& c) {
    std::vector<float> v(100, 1.f);
    std::atomic<bool> ran{false};
    Handle h = c.iall_reduce(v, v);
    h.then([&] { ran = true; });
    h.wait();
    EXPECT_TRUE(ran.load());
    EXPECT_EQ(v[99], 2.f);
  });
}

}  // namespace
}  // namespace origami::comm

namespace origami::comm {
namespace {
// Blocks larger than one 1 MiB chunk and not a multiple of it (1.5 MiB: a full chunk and a
// half one per ring step), two reduce-scatters in flight at once as TSP's dK/dV are.
TEST(ThreadsCollectives, ReduceScattersOfBlocksSpanningUnevenChunks) {
  run_ranks(4, [](Communicator& c) {
    const std::int64_t block = 393216, n = 4 * block;
    std::vector<float> a(static_cast<std::size_t>(n)), b(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      a[static_cast<std::size_t>(i)] = static_cast<float>((c.rank() + 1) * (i % 7));
      b[static_cast<std::size_t>(i)] = static_cast<float>((c.rank() + 1) * (i % 5));
    }
    std::vector<float> oa(static_cast<std::size_t>(block)), ob(static_cast<std::size_t>(block));
    Handle ha = c.ireduce_scatter(ConstBuffer(a.data(), n, DType::F32), Buffer(oa.data(), block, DType::F32));
    Handle hb = c.ireduce_scatter(ConstBuffer(b.data(), n, DType::F32), Buffer(ob.data(), block, DType::F32));
    ha.wait();
    hb.wait();
    for (std::int64_t i = 0; i < block; ++i) {
      const std::int64_t g = c.rank() * block + i;
      ASSERT_EQ(oa[static_cast<std::size_t>(i)], static_cast<float>(10 * (g % 7)));
      ASSERT_EQ(ob[static_cast<std::size_t>(i)], static_cast<float>(10 * (g % 5)));
    }
  });
}
}  // namespace
}  // namespace origami::comm
