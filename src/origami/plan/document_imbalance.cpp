#include "origami/plan/document_imbalance.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::plan {

double DocumentSample::documents_per_row() const {
  double documents = 0;
  for (const std::vector<std::int32_t>& row : rows)
    documents += row.empty() ? 0.0 : static_cast<double>(row.back()) + 1.0;
  return rows.empty() ? 0.0 : documents / static_cast<double>(rows.size());
}

namespace {

// Visible keys of each query of a row: its offset in its document's run, plus one.
void visible_keys_of_row(const std::vector<std::int32_t>& row, std::vector<double>& out) {
  out.resize(row.size());
  std::size_t start = 0;
  for (std::size_t p = 0; p < row.size(); ++p) {
    if (p > 0 && row[p] != row[p - 1]) start = p;
    out[p] = static_cast<double>(p - start + 1);
  }
}

}  // namespace

DocumentAttention document_attention(parallel::TokenLayoutKind kind, int degree,
                                     const std::vector<std::vector<std::int32_t>>& rows,
                                     std::int64_t batch) {
  DocumentAttention out;
  if (rows.empty()) return out;
  const auto S = static_cast<std::int64_t>(rows[0].size());
  const auto n = static_cast<std::int64_t>(rows.size());
  out.causal_pairs_per_row = static_cast<double>(S) * static_cast<double>(S + 1) / 2.0;
  out.rows_per_micro_batch = std::clamp<std::int64_t>(batch, 1, n);
  out.micro_batches = n / out.rows_per_micro_batch;
  const bool split = degree > 1 && kind != parallel::TokenLayoutKind::Full;
  const bool balanced = split && kind == parallel::TokenLayoutKind::Balanced;
  std::vector<parallel::TokenLayout> layouts;
  if (split)
    for (int r = 0; r < degree; ++r) layouts.emplace_back(kind, S, degree, r);  // refuses bad S
  std::vector<double> visible, work(split ? static_cast<std::size_t>(degree) : 1u);
  std::vector<std::int32_t> documents;  // a micro-batch's rows, [B, S], for the balanced layout
  double pairs = 0, busiest = 0;
  for (std::int64_t m = 0; m < out.micro_batches; ++m) {
    const std::int64_t first = m * out.rows_per_micro_batch;
    if (balanced) {
      documents.clear();
      for (std::int64_t b = 0; b < out.rows_per_micro_batch; ++b) {
        const std::vector<std::int32_t>& row = rows[static_cast<std::size_t>(first + b)];
        documents.insert(documents.end(), row.begin(), row.end());
      }
      for (int r = 0; r < degree; ++r)
        layouts[static_cast<std::size_t>(r)] = parallel::TokenLayout::balanced_for(
            S, degree, r, documents.data(), out.rows_per_micro_batch);
    }
    std::fill(work.begin(), work.end(), 0.0);
    for (std::int64_t b = 0; b < out.rows_per_micro_batch; ++b) {
      const std::vector<std::int32_t>& row = rows[static_cast<std::size_t>(first + b)];
      if (static_cast<std::int64_t>(row.size()) != S)
        throw ConfigError(
            fmt::format("document attention: rows of {} and {} tokens", S, row.size()));
      visible_keys_of_row(row, visible);
      if (!split) {
        for (const double v : visible) work[0] += v;
        continue;
      }
      for (int r = 0; r < degree; ++r)
        for (const std::int64_t p : layouts[static_cast<std::size_t>(r)].positions())
          work[static_cast<std::size_t>(r)] += visible[static_cast<std::size_t>(p)];
    }
    double most = 0, sum = 0;
    for (const double w : work) {
      most = std::max(most, w);
      sum += w;
    }
    pairs += sum;
    busiest += most;
    const double x = sum > 0 ? most / (sum / static_cast<double>(work.size())) - 1.0 : 0.0;
    out.imbalance_mean += x / static_cast<double>(out.micro_batches);
    out.imbalance_worst = std::max(out.imbalance_worst, x);
  }
  out.pairs_per_row =
      pairs / static_cast<double>(out.micro_batches * out.rows_per_micro_batch);
  if (pairs > 0) out.slowest_over_mean = busiest / (pairs / static_cast<double>(work.size()));
  return out;
}

WorkImbalance attention_work_imbalance(parallel::TokenLayoutKind kind, int degree,
                                       const std::vector<std::vector<std::int32_t>>& rows) {
  const DocumentAttention a = document_attention(kind, degree, rows, 1);
  return {a.imbalance_mean, a.imbalance_worst};
}

std::vector<std::vector<std::int32_t>> lognormal_packed_rows(std::int64_t S, std::int64_t rows,
                                                             double median, double sigma,
                                                             std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::lognormal_distribution<double> length(std::log(median), sigma);
  std::vector<std::vector<std::int32_t>> out;
  std::int64_t left_of_document = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::int32_t> ids;
    std::int32_t doc = -1;
    while (static_cast<std::int64_t>(ids.size()) < S) {
      if (left_of_document == 0)
        // (Clamped before rounding: a draw beyond the int64 range has no rounding.)
        left_of_document = std::llround(std::clamp(length(gen), 16.0, static_cast<double>(S)));
      const std::int64_t n = std::min(left_of_document, S - static_cast<std::int64_t>(ids.size()));
      ++doc;
      ids.insert(ids.end(), static_cast<std::size_t>(n), doc);
      left_of_document -= n;
    }
    out.push_back(std::move(ids));
  }
  return out;
}

}  // namespace origami::plan
