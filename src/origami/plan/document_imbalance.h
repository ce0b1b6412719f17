// The attention work of packed documents (--document-masking) on the ranks of a sequence axis,
// for the planner (`origami plan --documents`) and bench/document_imbalance_bench.cpp, from
// sample rows of document ids. Zigzag gives every rank the same causal work for one document
// per row; with document masking a query at offset i of its document's run in the row sees
// i + 1 keys (the kernels' visible pairs, kernels/attention.h attention_forward_flops with
// document ids, which tests/plan/document_imbalance_test.cpp holds this count to), so a rank's
// work depends on where the boundaries fall and on the layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "origami/parallel/layout.h"

namespace origami::plan {

// Sample rows the planner predicts document masking from, and the token layout of the run.
struct DocumentSample {
  std::string source;  // what the rows came from: "lognormal:1024,1.2" or a --data spec
  parallel::TokenLayoutKind layout = parallel::TokenLayoutKind::Zigzag;  // zigzag, contiguous,
                                                                          // balanced
  std::vector<std::vector<std::int32_t>> rows;  // document ids [S] each, counting up from 0
  std::int64_t seq() const { return rows.empty() ? 0 : static_cast<std::int64_t>(rows[0].size()); }
  double documents_per_row() const;  // mean over the rows
};

// The rows' attention work over `degree` ranks of one sequence axis, the rows taken as
// micro-batches of `batch` consecutive rows (a rank's work in a micro-batch is the sum over its
// rows; balanced: each micro-batch assigned by its own documents, as RankModel::localize does;
// rows left over after the last whole micro-batch are not counted; a batch above the rows:
// one micro-batch of all of them).
struct DocumentAttention {
  double imbalance_mean = 0;   // over micro-batches of max_rank(work) / mean_rank(work) - 1
  double imbalance_worst = 0;  // the largest micro-batch's
  // Sum over micro-batches of the busiest rank's work / the same of the mean rank's: what the
  // slowest rank's attention takes, against a balanced split (1 without a split).
  double slowest_over_mean = 1;
  double pairs_per_row = 0;    // visible (query, key) pairs of a row, all ranks, mean over rows
  double causal_pairs_per_row = 0;  // S (S + 1) / 2: one document per row
  std::int64_t micro_batches = 0, rows_per_micro_batch = 0;
};
// Rows of the same S, splittable by `kind` over `degree` ranks (else ConfigError); degree 1
// (or kind Full): no split, imbalance 0.
DocumentAttention document_attention(parallel::TokenLayoutKind kind, int degree,
                                     const std::vector<std::vector<std::int32_t>>& rows,
                                     std::int64_t batch = 1);

struct WorkImbalance {
  double mean = 0;   // over rows of max_rank(work) / mean_rank(work) - 1
  double worst = 0;  // the largest row's
};
// document_attention's imbalance with micro-batches of one row (the long-context case).
WorkImbalance attention_work_imbalance(parallel::TokenLayoutKind kind, int degree,
                                       const std::vector<std::vector<std::int32_t>>& rows);

// Rows of S tokens packed from a stream of documents whose lengths are log-normal (median
// `median` tokens, log standard deviation `sigma`, clamped to [16, S] before rounding); a document cut by the
// end of a row continues in the next row. Deterministic in `seed`.
std::vector<std::vector<std::int32_t>> lognormal_packed_rows(std::int64_t S, std::int64_t rows,
                                                             double median, double sigma,
                                                             std::uint64_t seed);

}  // namespace origami::plan
