#include "origami/parallel/balanced_layout.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::parallel {

void check_balanced_layout(const ParallelConfig& p, bool document_masking) {
  if (p.layout != TokenLayoutKind::Balanced) return;
  if (p.token_degree() == 1)
    throw ConfigError(fmt::format(
        "--layout balanced assigns the chunks of each sequence to the ranks that split it, but "
        "the plan {} splits no sequence; use a token-splitting strategy (sp/cp, TP+SP via "
        "--mesh tp=..,sp=.., or tsp) or drop --layout balanced",
        p.describe()));
  if (!document_masking)
    throw ConfigError(
        "--layout balanced balances the attention work of packed documents and needs "
        "--document-masking (rows without documents are one causal sequence, which zigzag "
        "already balances); add --document-masking or use --layout zigzag");
}

std::int64_t balanced_chunk_count(std::int64_t seq, int degree) {
  const std::int64_t fold = 2 * std::int64_t{degree};
  ORIGAMI_CHECK(degree >= 1 && seq % fold == 0, "balanced layout: {} positions over 2 x {}", seq,
                degree);
  for (const std::int64_t k : {4, 2})
    if (seq % (fold * k) == 0) return fold * k;
  return fold;
}

std::vector<double> chunk_attention_work(const std::int32_t* documents, std::int64_t batch,
                                         std::int64_t seq, std::int64_t chunks) {
  ORIGAMI_CHECK(chunks >= 1 && seq % chunks == 0, "{} chunks of {} positions", chunks, seq);
  const std::int64_t width = seq / chunks;
  std::vector<double> work(static_cast<std::size_t>(chunks), 0.0);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int32_t* row = documents == nullptr ? nullptr : documents + b * seq;
    std::int64_t start = 0;  // first position of the current document's run
    for (std::int64_t p = 0; p < seq; ++p) {
      if (row != nullptr && p > 0 && row[p] != row[p - 1]) start = p;
      work[static_cast<std::size_t>(p / width)] += static_cast<double>(p - start + 1);
    }
  }
  return work;
}

std::vector<std::int64_t> assign_balanced_chunks(const std::vector<double>& work, int degree) {
  const auto C = static_cast<std::int64_t>(work.size());
  ORIGAMI_CHECK(degree >= 1 && C % degree == 0, "{} chunks over {} ranks", C, degree);
  const std::int64_t per = C / degree;
  std::vector<std::int64_t> order(static_cast<std::size_t>(C));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return work[static_cast<std::size_t>(a)] > work[static_cast<std::size_t>(b)];
  });
  std::vector<std::vector<std::int64_t>> held(static_cast<std::size_t>(degree));
  std::vector<double> load(static_cast<std::size_t>(degree), 0.0);
  for (const std::int64_t c : order) {
    int best = -1;
    for (int r = 0; r < degree; ++r)
      if (static_cast<std::int64_t>(held[static_cast<std::size_t>(r)].size()) < per &&
          (best < 0 || load[static_cast<std::size_t>(r)] < load[static_cast<std::size_t>(best)]))
        best = r;
    held[static_cast<std::size_t>(best)].push_back(c);
    load[static_cast<std::size_t>(best)] += work[static_cast<std::size_t>(c)];
  }
  // Swaps between the busiest rank and another. Each accepted swap leaves both loads strictly
  // between the old two (so the sum of squared loads falls): it terminates; the cap only
  // bounds the time on adversarial inputs.
  for (std::int64_t round = 0; round < C * C; ++round) {
    const auto m = static_cast<std::size_t>(std::max_element(load.begin(), load.end()) -
                                            load.begin());
    double best_max = load[m] * (1.0 - 1e-12);  // a swap must lower the busiest rank's work
    std::size_t best_o = 0, best_a = 0, best_b = 0;
    bool found = false;
    for (std::size_t o = 0; o < held.size(); ++o) {
      if (o == m) continue;
      for (std::size_t a = 0; a < held[m].size(); ++a)
        for (std::size_t b = 0; b < held[o].size(); ++b) {
          const double d = work[static_cast<std::size_t>(held[m][a])] -
                           work[static_cast<std::size_t>(held[o][b])];
          if (d <= 0) continue;
          const double worse = std::max(load[m] - d, load[o] + d);
          if (worse < best_max) {
            best_max = worse;
            best_o = o, best_a = a, best_b = b;
            found = true;
          }
        }
    }
    if (!found) break;
    const double d = work[static_cast<std::size_t>(held[m][best_a])] -
                     work[static_cast<std::size_t>(held[best_o][best_b])];
    std::swap(held[m][best_a], held[best_o][best_b]);
    load[m] -= d;
    load[best_o] += d;
  }
  std::vector<std::int64_t> out;
  for (std::vector<std::int64_t>& h : held) {
    std::sort(h.begin(), h.end());
    out.insert(out.end(), h.begin(), h.end());
  }
  return out;
}

}  // namespace origami::parallel
