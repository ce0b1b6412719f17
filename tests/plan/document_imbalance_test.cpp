// The attention-work imbalance of packed documents (plan/document_imbalance.h) against counts
// done by hand: none for one document per row under zigzag, the closed form of the contiguous
// layout, a row of documents that each sit on one rank, and the packed-row generator.
#include "origami/plan/document_imbalance.h"

#include <gtest/gtest.h>

#include "origami/core/error.h"

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

}  // namespace
}  // namespace origami::plan
