#include "origami/plan/document_imbalance.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/kernels/attention.h"

namespace origami::plan {

WorkImbalance attention_work_imbalance(parallel::TokenLayoutKind kind, int degree,
                                       const std::vector<std::vector<std::int32_t>>& rows) {
  WorkImbalance out;
  if (rows.empty()) return out;
  const auto S = static_cast<std::int64_t>(rows[0].size());
  std::vector<parallel::TokenLayout> layouts;
  for (int r = 0; r < degree; ++r) layouts.emplace_back(kind, S, degree, r);  // refuses bad S
  const bool balanced = kind == parallel::TokenLayoutKind::Balanced;
  std::vector<std::int64_t> keys(static_cast<std::size_t>(S));
  std::iota(keys.begin(), keys.end(), 0);
  std::vector<std::int32_t> q_doc;
  for (const std::vector<std::int32_t>& row : rows) {
    if (static_cast<std::int64_t>(row.size()) != S)
      throw ConfigError(fmt::format("document imbalance: rows of {} and {} tokens", S, row.size()));
    if (balanced)  // the row's own assignment, as a micro-batch of this one row gets it
      for (int r = 0; r < degree; ++r)
        layouts[static_cast<std::size_t>(r)] =
            parallel::TokenLayout::balanced_for(S, degree, r, row.data(), 1);
    double most = 0, sum = 0;
    for (const parallel::TokenLayout& layout : layouts) {
      const std::vector<std::int64_t>& q = layout.positions();
      q_doc.clear();
      for (const std::int64_t p : q) q_doc.push_back(row[static_cast<std::size_t>(p)]);
      const kernels::AttentionShape s{1, static_cast<std::int64_t>(q.size()), S, 1, 1, 1};
      const double work =
          kernels::attention_forward_flops(s, q.data(), keys.data(), {q_doc.data(), row.data()});
      most = std::max(most, work);
      sum += work;
    }
    const double x = sum > 0 ? most / (sum / degree) - 1.0 : 0.0;
    out.mean += x / static_cast<double>(rows.size());
    out.worst = std::max(out.worst, x);
  }
  return out;
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
        left_of_document = std::clamp<std::int64_t>(std::llround(length(gen)), 16, S);
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
