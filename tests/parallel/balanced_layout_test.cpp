// The balanced token layout (parallel/balanced_layout.h): chunk work counted by hand, the
// greedy assignment on a hand example, every assignment a permutation of the positions with
// S/D per rank and the same on every rank, lower max/mean work than zigzag on a skewed mix,
// an assignment that differs from zigzag on the parity suite's packed rows (so ParityPacked's
// balanced cases exercise another chunk order), and the refusals.
#include "origami/parallel/balanced_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "harness.h"
#include "origami/core/error.h"
#include "origami/parallel/layout.h"
#include "origami/parallel/registry.h"
#include "origami/plan/document_imbalance.h"

namespace origami::parallel {
namespace {

// Document ids of a row packed from these lengths.
std::vector<std::int32_t> row_of(const std::vector<std::int64_t>& lengths) {
  std::vector<std::int32_t> ids;
  std::int32_t doc = 0;
  for (const std::int64_t n : lengths) ids.insert(ids.end(), static_cast<std::size_t>(n), doc++);
  return ids;
}

TEST(BalancedLayout, ChunkCountIsTheLargestFoldThatDivides) {
  EXPECT_EQ(balanced_chunk_count(48, 2), 16);  // 2D x 4
  EXPECT_EQ(balanced_chunk_count(48, 3), 24);
  EXPECT_EQ(balanced_chunk_count(48, 4), 16);  // 2D x 2 (48 % 32 != 0)
  EXPECT_EQ(balanced_chunk_count(40, 4), 8);   // 2D x 1
}

TEST(BalancedLayout, ChunkWorkCountsVisiblePairsWithinDocuments) {
  // Row [3 | 1 | 4] in 4 chunks of 2: per-token keys 1 2 3 | 1 | 1 2 3 4.
  const std::vector<std::int32_t> row = row_of({3, 1, 4});
  EXPECT_EQ(chunk_attention_work(row.data(), 1, 8, 4), (std::vector<double>{3, 4, 3, 7}));
  // Two rows add; no documents is one causal document per row (keys 1..8).
  std::vector<std::int32_t> two = row;
  two.insert(two.end(), row.begin(), row.end());
  EXPECT_EQ(chunk_attention_work(two.data(), 2, 8, 4), (std::vector<double>{6, 8, 6, 14}));
  EXPECT_EQ(chunk_attention_work(nullptr, 1, 8, 4), (std::vector<double>{3, 7, 11, 15}));
}

TEST(BalancedLayout, GreedyThenSwapsOnAHandExample) {
  // Largest first onto the lighter rank with room: 8->0, 7->1, 6->1, 5->0, 4->0 (tie: lower
  // rank), 3->1, 2->1 (full), 1->0: both ranks 18.
  EXPECT_EQ(assign_balanced_chunks({8, 7, 6, 5, 4, 3, 2, 1}, 2),
            (std::vector<std::int64_t>{0, 3, 4, 7, 1, 2, 5, 6}));
  // Greedy: 8 (chunk 2) -> 0, 7 (4) -> 1, 7 (5) -> 1, 6 (0) -> 0, 3 (3) -> 0 (tie), 0 (1) ->
  // 1: 17 against 14. Swapping chunks 2 and 4 (8 for 7) gives 16 against 15, the optimum.
  EXPECT_EQ(assign_balanced_chunks({6, 0, 8, 3, 7, 7}, 2),
            (std::vector<std::int64_t>{0, 3, 4, 1, 2, 5}));
}

// The busiest rank's work of an assignment (chunks rank after rank).
double busiest(const std::vector<double>& work, const std::vector<std::int64_t>& order, int D) {
  const std::size_t per = order.size() / static_cast<std::size_t>(D);
  double most = 0;
  for (std::size_t r = 0; r < static_cast<std::size_t>(D); ++r) {
    double load = 0;
    for (std::size_t i = 0; i < per; ++i) load += work[static_cast<std::size_t>(order[r * per + i])];
    most = std::max(most, load);
  }
  return most;
}

TEST(BalancedLayout, NearTheExhaustiveOptimumOnRandomWork) {
  // 8 chunks over 2 ranks: every 4-of-8 split tried. Work skewed like packed documents
  // (squares of uniform draws: a few heavy chunks).
  std::mt19937 gen(3);
  std::uniform_real_distribution<double> u(0.0, 10.0);
  int optimal = 0;
  constexpr int kTrials = 200;
  for (int t = 0; t < kTrials; ++t) {
    std::vector<double> w(8);
    for (double& x : w) x = std::floor(u(gen) * u(gen));
    double best = 1e300;
    for (unsigned mask = 0; mask < 256; ++mask) {
      if (__builtin_popcount(mask) != 4) continue;
      double a = 0, b = 0;
      for (int i = 0; i < 8; ++i) (mask >> i & 1 ? a : b) += w[static_cast<std::size_t>(i)];
      best = std::min(best, std::max(a, b));
    }
    const double got = busiest(w, assign_balanced_chunks(w, 2), 2);
    EXPECT_GE(got, best);
    EXPECT_LE(got, 1.05 * best + 1e-9) << "trial " << t;
    optimal += got == best;
  }
  std::printf("  optimal in %d of %d trials\n", optimal, kTrials);
  EXPECT_GE(optimal, kTrials * 3 / 4);
}

TEST(BalancedLayout, EveryAssignmentIsAPermutationWithSOverDPerRankOnEveryRank) {
  std::mt19937 gen(11);
  for (const int D : {2, 3, 4, 8}) {
    for (const std::int64_t S : {48, 96, 240}) {
      if (S % (2 * D) != 0) continue;
      for (int trial = 0; trial < 3; ++trial) {
        const std::int64_t B = 1 + trial;
        std::vector<std::int32_t> docs;  // B rows of random lengths 1 .. S/3
        for (std::int64_t b = 0; b < B; ++b) {
          std::vector<std::int64_t> lengths;
          for (std::int64_t left = S; left > 0;) {
            const std::int64_t n = std::min<std::int64_t>(left, 1 + gen() % (S / 3));
            lengths.push_back(n);
            left -= n;
          }
          const std::vector<std::int32_t> row = row_of(lengths);
          docs.insert(docs.end(), row.begin(), row.end());
        }
        const TokenLayout first = TokenLayout::balanced_for(S, D, 0, docs.data(), B);
        std::vector<std::int64_t> all;
        for (int r = 0; r < D; ++r) {
          const TokenLayout mine = TokenLayout::balanced_for(S, D, r, docs.data(), B);
          EXPECT_EQ(mine.positions(), first.positions_of(r)) << "rank " << r << " disagrees";
          ASSERT_EQ(mine.local_seq(), S / D);
          EXPECT_TRUE(std::is_sorted(mine.positions().begin(), mine.positions().end()));
          all.insert(all.end(), mine.positions().begin(), mine.positions().end());
        }
        std::sort(all.begin(), all.end());
        std::vector<std::int64_t> expect(static_cast<std::size_t>(S));
        std::iota(expect.begin(), expect.end(), 0);
        EXPECT_EQ(all, expect) << "S " << S << " D " << D;
      }
    }
  }
}

TEST(BalancedLayout, LowersTheWorkImbalanceOfZigzagOnASkewedMix) {
  // Log-normal lengths, median 96 tokens of S = 960, sigma 1.2 (a few long documents beside
  // many short ones), 16 rows, each assigned by its own documents.
  const auto rows = plan::lognormal_packed_rows(960, 16, 96.0, 1.2, 5);
  for (const int D : {2, 3, 4}) {
    const plan::WorkImbalance z = plan::attention_work_imbalance(TokenLayoutKind::Zigzag, D, rows);
    const plan::WorkImbalance b =
        plan::attention_work_imbalance(TokenLayoutKind::Balanced, D, rows);
    std::printf("  D %d: zigzag mean %.1f%% worst %.1f%%, balanced mean %.1f%% worst %.1f%%\n", D,
                100 * z.mean, 100 * z.worst, 100 * b.mean, 100 * b.worst);
    EXPECT_GT(z.mean, 0.10) << D;  // the mix is skewed enough to need balancing
    EXPECT_LT(b.mean, 0.25 * z.mean) << D;
    EXPECT_LT(b.worst, z.worst) << D;
  }
  // One causal document per row: the balanced assignment is as even as zigzag's (its C = 2D*k
  // chunks cannot all pair up exactly, but within 1 %).
  const std::vector<std::vector<std::int32_t>> whole(1, std::vector<std::int32_t>(960, 0));
  EXPECT_LT(plan::attention_work_imbalance(TokenLayoutKind::Balanced, 4, whole).worst, 0.01);
}

TEST(BalancedLayout, DiffersFromZigzagOnTheParityRows) {
  // The rows of ParityPacked's balanced cases (harness.h packed_lengths, S = 48, B = 2).
  for (const int D : {2, 3, 4}) {
    std::vector<std::int32_t> docs;
    for (std::int64_t r = 0; r < 2; ++r) {
      const std::vector<std::int32_t> row = row_of(parity::packed_lengths(48, r));
      docs.insert(docs.end(), row.begin(), row.end());
    }
    bool differs = false;
    for (int r = 0; r < D; ++r)
      differs |= TokenLayout::balanced_for(48, D, r, docs.data(), 2).positions() !=
                 TokenLayout(TokenLayoutKind::Zigzag, 48, D, r).positions();
    EXPECT_TRUE(differs) << D;
  }
}

TEST(BalancedLayout, RefusedWhereItCannotApply) {
  EXPECT_EQ(parse_token_layout("balanced"), TokenLayoutKind::Balanced);
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const ParallelConfig tp = make_parallel_config("tp", 2, "", false, TokenLayoutKind::Balanced);
  EXPECT_NE(message([&] { check_balanced_layout(tp, true); }).find("splits no sequence"),
            std::string::npos);
  const ParallelConfig sp = make_parallel_config("sp", 2, "", false, TokenLayoutKind::Balanced);
  EXPECT_NE(message([&] { check_balanced_layout(sp, false); }).find("--document-masking"),
            std::string::npos);
  EXPECT_NO_THROW(check_balanced_layout(sp, true));
  const ParallelConfig zz = make_parallel_config("tp", 2, "", false, TokenLayoutKind::Zigzag);
  EXPECT_NO_THROW(check_balanced_layout(zz, false));  // other layouts: nothing to check
  EXPECT_NE(message([] { TokenLayout(TokenLayoutKind::Balanced, 20, 3, 0); })
                .find("balanced layout needs the sequence length divisible by 2 x degree"),
            std::string::npos);
}

}  // namespace
}  // namespace origami::parallel
