// The attention-work imbalance across the ranks of a sequence axis that document masking
// causes: zigzag balances the causal work of one document per row exactly, but with packed
// documents a rank's work is the visible pairs within documents of its queries, which the
// layout no longer balances. For rows of S tokens packed from a realistic length mix
// (log-normal lengths, median 1K tokens, sigma 1.2, 16 .. S, split across rows as packing
// does), prints per layout and degree D the mean and worst over rows of
// max_rank(work) / mean_rank(work) - 1, work = attention_forward_flops of the rank's queries
// against every key with document ids (the forward; backward is 2.5x the same pairs), as
// plan/document_imbalance.h counts it; beside them the balanced layout (--layout balanced),
// which assigns 2D*k chunks to the ranks by that work.
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

#include "origami/parallel/balanced_layout.h"
#include "origami/parallel/layout.h"
#include "origami/plan/document_imbalance.h"

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
  using origami::parallel::TokenLayoutKind;
  const auto data = origami::plan::lognormal_packed_rows(S, rows, 1024.0, 1.2, 2026);
  std::int64_t docs = 0;
  for (const auto& r : data) docs += r.back() + 1;
  std::printf("rows of S = %lld tokens, %lld rows, %.1f documents per row (log-normal lengths, "
              "median 1024, sigma 1.2, 16 .. S)\n",
              static_cast<long long>(S), static_cast<long long>(rows),
              static_cast<double>(docs) / static_cast<double>(rows));
  // Side by side per degree: the fixed layouts and the balanced one (each row assigned by its
  // own documents, parallel/balanced_layout.h), mean over rows / worst row.
  std::printf("%3s  %-19s  %-19s  %-19s  %s\n", "D", "zigzag mean/worst", "contiguous",
              "balanced", "balanced chunks");
  for (const int D : {2, 4, 8}) {
    std::printf("%3d", D);
    for (const TokenLayoutKind kind :
         {TokenLayoutKind::Zigzag, TokenLayoutKind::Contiguous, TokenLayoutKind::Balanced}) {
      const origami::plan::WorkImbalance w = origami::plan::attention_work_imbalance(kind, D, data);
      std::printf("  %8.1f%% / %6.1f%%", 100.0 * w.mean, 100.0 * w.worst);
    }
    std::printf("  %lld x %lld tokens\n",
                static_cast<long long>(origami::parallel::balanced_chunk_count(S, D)),
                static_cast<long long>(S / origami::parallel::balanced_chunk_count(S, D)));
  }
  return 0;
}
