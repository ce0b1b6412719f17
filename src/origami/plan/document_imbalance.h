// The attention-work imbalance that packed documents cause across the ranks of a sequence
// axis. Zigzag gives every rank the same causal work for one document per row; with document
// masking a rank's work is the visible pairs of its queries within their own documents, which
// depends on where the boundaries fall. Counted exactly (kernels/attention.h
// attention_forward_flops with document ids), per row, from the rows' document ids.
#pragma once

#include <cstdint>
#include <vector>

#include "origami/parallel/layout.h"

namespace origami::plan {

struct WorkImbalance {
  double mean = 0;   // over rows of max_rank(work) / mean_rank(work) - 1
  double worst = 0;  // the largest row's
};

// rows: each row's document ids ([S], counting up from 0 as packing gives them; S the same
// for every row and splittable by `kind` over `degree` ranks, else ConfigError). Balanced:
// each row assigned by its own documents (a micro-batch of one row, the long-context case).
WorkImbalance attention_work_imbalance(parallel::TokenLayoutKind kind, int degree,
                                       const std::vector<std::vector<std::int32_t>>& rows);

// Rows of S tokens packed from a stream of documents whose lengths are log-normal (median
// `median` tokens, log standard deviation `sigma`, clamped to [16, S]); a document cut by the
// end of a row continues in the next row. Deterministic in `seed`.
std::vector<std::vector<std::int32_t>> lognormal_packed_rows(std::int64_t S, std::int64_t rows,
                                                             double median, double sigma,
                                                             std::uint64_t seed);

}  // namespace origami::plan
