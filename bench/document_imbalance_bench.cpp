// The attention-work imbalance across the ranks of a sequence axis that document masking
// causes: zigzag balances the causal work of one document per row exactly, but with packed
// documents a rank's work is the visible pairs within documents of its queries, which the
// layout no longer balances. For rows of S tokens packed from a realistic length mix
// (log-normal lengths, median 1K tokens, sigma 1.2, 16 .. S, split across rows as packing
// does), prints per layout and degree D the mean and worst over rows of
// max_rank(work) / mean_rank(work) - 1, work = attention_forward_flops of the rank's queries
// against every key with document ids (the forward; backward is 2.5x the same pairs).
// Run: build/bench/document_imbalance_bench [--seq 16384] [--rows 64]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "origami/kernels/attention.h"
#include "origami/parallel/layout.h"

namespace {

using origami::parallel::TokenLayout;
using origami::parallel::TokenLayoutKind;

// Document ids of `rows` rows of S tokens: a stream of documents of log-normal lengths cut
// into rows (a document split by a row end continues in the next row as a new document).
std::vector<std::vector<std::int32_t>> packed_rows(std::int64_t S, std::int64_t rows,
                                                   unsigned seed) {
  std::mt19937_64 gen(seed);
  std::lognormal_distribution<double> length(std::log(1024.0), 1.2);
  std::vector<std::vector<std::int32_t>> out;
  std::int64_t left_of_document = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::int32_t> ids;
    std::int32_t doc = -1;
    while (static_cast<std::int64_t>(ids.size()) < S) {
      if (left_of_document == 0)
        left_of_document = std::clamp<std::int64_t>(std::llround(length(gen)), 16, S);
      const std::int64_t n =
          std::min(left_of_document, S - static_cast<std::int64_t>(ids.size()));
      ++doc;
      ids.insert(ids.end(), static_cast<std::size_t>(n), doc);
      left_of_document -= n;
    }
    out.push_back(std::move(ids));
  }
  return out;
}

// max / mean - 1 of the ranks' forward attention work on one row.
double imbalance(const std::vector<std::int32_t>& row, TokenLayoutKind kind, int D) {
  const auto S = static_cast<std::int64_t>(row.size());
  std::vector<std::int64_t> keys(static_cast<std::size_t>(S));
  std::iota(keys.begin(), keys.end(), 0);
  std::vector<double> work;
  for (int r = 0; r < D; ++r) {
    const TokenLayout layout(kind, S, D, r);
    const std::vector<std::int64_t>& q = layout.positions();
    std::vector<std::int32_t> q_doc;
    for (const std::int64_t p : q) q_doc.push_back(row[static_cast<std::size_t>(p)]);
    const origami::kernels::AttentionShape s{1, static_cast<std::int64_t>(q.size()), S, 1, 1, 1};
    work.push_back(origami::kernels::attention_forward_flops(s, q.data(), keys.data(),
                                                             {q_doc.data(), row.data()}));
  }
  const double mean = std::accumulate(work.begin(), work.end(), 0.0) / D;
  return *std::max_element(work.begin(), work.end()) / mean - 1.0;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t S = 16384, rows = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--seq") S = std::atoll(argv[i + 1]);
    else if (a == "--rows") rows = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s (use --seq, --rows)\n", argv[i]);
      return 2;
    }
  }
  if (S < 64 || S % 16 != 0 || rows < 1) {
    std::fprintf(stderr, "need --seq >= 64, a multiple of 16, and --rows >= 1\n");
    return 2;
  }
  const auto data = packed_rows(S, rows, 2026);
  std::int64_t docs = 0;
  for (const auto& r : data) docs += r.back() + 1;
  std::printf("rows of S = %lld tokens, %lld rows, %.1f documents per row (log-normal lengths, "
              "median 1024, sigma 1.2, 16 .. S)\n",
              static_cast<long long>(S), static_cast<long long>(rows),
              static_cast<double>(docs) / static_cast<double>(rows));
  std::printf("%-11s %3s  %22s  %22s\n", "layout", "D", "mean imbalance (max/mean-1)",
              "worst row");
  for (const TokenLayoutKind kind : {TokenLayoutKind::Zigzag, TokenLayoutKind::Contiguous}) {
    for (const int D : {2, 4, 8}) {
      double sum = 0, worst = 0;
      for (const auto& r : data) {
        const double x = imbalance(r, kind, D);
        sum += x;
        worst = std::max(worst, x);
      }
      std::printf("%-11s %3d  %21.1f%%  %21.1f%%\n",
                  kind == TokenLayoutKind::Zigzag ? "zigzag" : "contiguous", D,
                  100.0 * sum / static_cast<double>(rows), 100.0 * worst);
    }
  }
  return 0;
}
