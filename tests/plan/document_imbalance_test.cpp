// The attention-work imbalance of packed documents (plan/document_imbalance.h) against counts
// done by hand: none for one document per row under zigzag, the closed form of the contiguous
// layout, a row of documents that each sit on one rank, and the packed-row generator; and
// against the kernels' own count (the FLOPs a run charges) per rank, for every layout and
// micro-batch size, as the planner uses it (predict's masked FLOPs and slowest rank).
#include "origami/plan/document_imbalance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "origami/core/error.h"
#include "origami/kernels/attention.h"
#include "origami/plan/predict.h"
#include "small_plan_model.h"

namespace origami::plan {
namespace {

using parallel::TokenLayoutKind;

TEST(DocumentImbalance, OneDocumentPerRowIsBalancedByZigzag) {
  const std::vector<std::vector<std::int32_t>> rows(3, std::vector<std::int32_t>(96, 0));
  for (const int D : {2, 3, 4}) {
    const WorkImbalance w = attention_work_imbalance(TokenLayoutKind::Zigzag, D, rows);
    EXPECT_EQ(w.mean, 0.0) << D;
    EXPECT_EQ(w.worst, 0.0) << D;
  }
  // Contiguous: the last rank's queries see the most keys. With S = 96 over D = 2, rank 1
  // holds positions 48..95: pairs sum(49..96) = 3480 of 4656, mean 2328.
  const WorkImbalance c = attention_work_imbalance(TokenLayoutKind::Contiguous, 2, rows);
  EXPECT_DOUBLE_EQ(c.worst, 3480.0 / 2328.0 - 1.0);
  EXPECT_DOUBLE_EQ(c.mean, c.worst);
}

TEST(DocumentImbalance, DocumentsOnOneRankEachAreCountedWithinThemselves) {
  // S = 16, zigzag over 2: rank 0 holds chunks [0,4) and [12,16), rank 1 [4,12). Documents
  // [0,4), [4,12), [12,16): rank 0 has two documents of 4 (10 + 10 pairs), rank 1 one of 8
  // (36 pairs): max/mean - 1 = 36 / 28 - 1.
  std::vector<std::int32_t> row(16);
  for (int i = 0; i < 16; ++i) row[static_cast<std::size_t>(i)] = i < 4 ? 0 : i < 12 ? 1 : 2;
  const WorkImbalance w = attention_work_imbalance(TokenLayoutKind::Zigzag, 2, {row});
  EXPECT_DOUBLE_EQ(w.worst, 36.0 / 28.0 - 1.0);
  EXPECT_THROW(attention_work_imbalance(TokenLayoutKind::Zigzag, 3, {row}), ConfigError);
}

TEST(DocumentImbalance, PackedRowsCountTheirDocumentsUp) {
  const auto rows = lognormal_packed_rows(512, 5, 100.0, 1.0, 7);
  ASSERT_EQ(rows.size(), 5u);
  for (const auto& r : rows) {
    ASSERT_EQ(r.size(), 512u);
    EXPECT_EQ(r[0], 0);
    for (std::size_t i = 1; i < r.size(); ++i) EXPECT_TRUE(r[i] == r[i - 1] || r[i] == r[i - 1] + 1);
    EXPECT_GT(r.back(), 0);  // a median of 100 tokens: several documents in 512
  }
  EXPECT_EQ(rows, lognormal_packed_rows(512, 5, 100.0, 1.0, 7));  // deterministic
}

// What the kernels charge a rank for its queries of one micro-batch (attention_forward_flops
// with document ids, one head of width 1: 4 x the visible pairs), under the engine's layouts
// (TokenLayout; balanced: balanced_for over the micro-batch's rows, as RankModel::localize).
std::vector<double> kernel_pairs_per_rank(parallel::TokenLayoutKind kind, int D,
                                          const std::vector<std::vector<std::int32_t>>& rows,
                                          std::int64_t first, std::int64_t batch) {
  const auto S = static_cast<std::int64_t>(rows[0].size());
  std::vector<std::int32_t> flat;
  for (std::int64_t b = first; b < first + batch; ++b)
    flat.insert(flat.end(), rows[static_cast<std::size_t>(b)].begin(),
                rows[static_cast<std::size_t>(b)].end());
  std::vector<std::int64_t> keys(static_cast<std::size_t>(S));
  std::iota(keys.begin(), keys.end(), 0);
  std::vector<double> pairs;
  for (int r = 0; r < D; ++r) {
    const parallel::TokenLayout layout =
        kind == parallel::TokenLayoutKind::Balanced
            ? parallel::TokenLayout::balanced_for(S, D, r, flat.data(), batch)
            : parallel::TokenLayout(kind, S, D, r);
    const std::vector<std::int32_t> q_doc = layout.slice(flat.data(), batch);
    const kernels::AttentionShape shape{batch, layout.local_seq(), S, 1, 1, 1};
    pairs.push_back(kernels::attention_forward_flops(shape, layout.positions().data(),
                                                     keys.data(), {q_doc.data(), flat.data()}) /
                    4.0);
  }
  return pairs;
}

TEST(DocumentImbalance, EqualsTheKernelsCountPerRankForEveryLayoutAndMicroBatch) {
  // S = 240 splits over D = 2, 3, 4 (240 % 2D == 0); 7 rows: batch 2 and 3 leave a row over.
  const auto rows = lognormal_packed_rows(240, 7, 40.0, 1.0, 11);
  for (const auto kind : {TokenLayoutKind::Zigzag, TokenLayoutKind::Contiguous,
                          TokenLayoutKind::Balanced}) {
    for (const int D : {2, 3, 4}) {
      for (const std::int64_t B : {1, 2, 3}) {
        const DocumentAttention a = document_attention(kind, D, rows, B);
        double pairs = 0, busiest = 0, mean = 0, worst = 0;
        const std::int64_t micro = 7 / B;
        for (std::int64_t m = 0; m < micro; ++m) {
          const std::vector<double> w = kernel_pairs_per_rank(kind, D, rows, m * B, B);
          const double sum = std::accumulate(w.begin(), w.end(), 0.0);
          const double most = *std::max_element(w.begin(), w.end());
          pairs += sum;
          busiest += most;
          const double x = most / (sum / D) - 1.0;
          mean += x / static_cast<double>(micro);
          worst = std::max(worst, x);
        }
        const std::string what = parallel::token_layout_name(kind) + " D " +
                                 std::to_string(D) + " B " + std::to_string(B);
        EXPECT_EQ(a.micro_batches, micro) << what;
        EXPECT_EQ(a.pairs_per_row, pairs / static_cast<double>(micro * B)) << what;  // integers
        EXPECT_DOUBLE_EQ(a.imbalance_mean, mean) << what;
        EXPECT_DOUBLE_EQ(a.imbalance_worst, worst) << what;
        EXPECT_DOUBLE_EQ(a.slowest_over_mean, busiest / (pairs / D)) << what;
        if (kind == TokenLayoutKind::Zigzag) {
          EXPECT_GT(a.imbalance_worst, 0.05) << what;
        }
      }
    }
  }
  // No split: the whole row's pairs, no imbalance.
  const DocumentAttention one = document_attention(TokenLayoutKind::Zigzag, 1, rows, 1);
  EXPECT_EQ(one.imbalance_worst, 0.0);
  EXPECT_EQ(one.pairs_per_row, kernel_pairs_per_rank(TokenLayoutKind::Full, 1, rows, 0, 7)[0] / 7);
  EXPECT_EQ(one.causal_pairs_per_row, 240.0 * 241.0 / 2.0);
}

// predict with packed documents: the attention FLOPs are the kernels' count of the rows (the
// mean device's share), the imbalance is the sequence ranks', and the compute time charges the
// slowest rank's attention; rows that split no sequence have no imbalance.
TEST(DocumentImbalance, PredictChargesTheMaskedPairsAndTheSlowestRank) {
  const ModelConfig m = small_plan_model(240);
  const Hardware hw = hardware_preset("cpu");
  auto sample = std::make_shared<DocumentSample>();
  sample->rows = lognormal_packed_rows(240, 8, 40.0, 1.0, 5);
  Workload causal;
  causal.seq = 240;
  causal.batch = 2;
  for (const auto kind : {TokenLayoutKind::Zigzag, TokenLayoutKind::Balanced}) {
    sample->layout = kind;
    Workload packed = causal;
    packed.documents = sample;
    for (const Layout& l : {Layout{.tsp = 4}, Layout{.sp = 2}, Layout{.dp = 2, .sp = 2},
                            Layout{.tp = 2, .sp = 2}, Layout{.tp = 4}, Layout{}}) {
      const Prediction full = predict(m, l, causal, hw), docs = predict(m, l, packed, hw);
      const std::string what = parallel::token_layout_name(kind) + " " + l.describe();
      // The kernels' pairs of the job's micro-batches: each replica runs `batch` rows.
      double pairs = 0, busiest = 0;
      const int D = l.token_degree();
      for (std::int64_t first = 0; first + 2 <= 8; first += 2) {
        const std::vector<double> w = kernel_pairs_per_rank(D > 1 ? kind : TokenLayoutKind::Full,
                                                            D, sample->rows, first, 2);
        pairs += std::accumulate(w.begin(), w.end(), 0.0);
        busiest += *std::max_element(w.begin(), w.end());
      }
      const double per_row = pairs / 8, causal_per_row = 240.0 * 241.0 / 2;
      EXPECT_DOUBLE_EQ(full.attention_flops_per_device, full.causal_attention_flops_per_device);
      EXPECT_DOUBLE_EQ(docs.causal_attention_flops_per_device,
                       full.causal_attention_flops_per_device);
      // 3.5 x 4 d H L x the pairs of the job's 2 x dp rows, over the world.
      const double attention = 3.5 * 4 * 16 * 4 * 2 * per_row * 2 * l.dp / l.world();
      EXPECT_DOUBLE_EQ(docs.attention_flops_per_device, attention) << what;
      EXPECT_DOUBLE_EQ(full.attention_flops_per_device, attention / per_row * causal_per_row)
          << what;
      EXPECT_DOUBLE_EQ(full.executed_flops_per_device - docs.executed_flops_per_device,
                       full.attention_flops_per_device - attention)
          << what;
      const double slowest = D > 1 ? busiest / (pairs / D) : 1.0;
      EXPECT_NEAR(docs.compute_s,
                  (docs.executed_flops_per_device + attention * (slowest - 1)) /
                      hw.flops_per_s(Precision::fp32()),
                  1e-12 * docs.compute_s)
          << what;
      if (D == 1) {
        EXPECT_EQ(docs.attention_imbalance, 0.0) << what;
      } else if (kind == TokenLayoutKind::Zigzag) {
        EXPECT_GT(docs.attention_imbalance, 0.05) << what;
      }
      EXPECT_EQ(full.attention_imbalance, 0.0) << what;
    }
  }
}

}  // namespace
}  // namespace origami::plan
