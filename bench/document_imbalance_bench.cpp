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
// With --time-rows N (default 2; 0: off) it also times, for the first N rows, each rank's
// attention forward (its S/D queries against all S keys with document ids, d = 64, one head,
// one kernel thread, processor time, best of 5) under zigzag and balanced, and prints max/mean - 1 of the
// measured times (mean over those rows) and the slowest rank's time (summed over them).
// Run: build/bench/document_imbalance_bench [--seq 16384] [--rows 64] [--time-rows 2]
#include <algorithm>
#include <cmath>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "origami/kernels/attention.h"
#include "origami/kernels/simd.h"
#include "origami/kernels/threads.h"
#include "origami/parallel/balanced_layout.h"
#include "origami/parallel/layout.h"
#include "origami/plan/document_imbalance.h"

namespace {

using origami::parallel::TokenLayout;
using origami::parallel::TokenLayoutKind;

// Best of 5 processor seconds of one rank's attention forward over row `row` (document ids [S]).
double rank_attention_seconds(const TokenLayout& layout, const std::vector<std::int32_t>& row) {
  const std::int64_t S = layout.seq(), Sl = layout.local_seq(), d = 64;
  const origami::kernels::AttentionShape s{1, Sl, S, 1, 1, d};
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> q(static_cast<std::size_t>(Sl * d)), k(static_cast<std::size_t>(S * d)),
      v(k.size()), out(q.size()), lse(static_cast<std::size_t>(Sl));
  for (auto* x : {&q, &k, &v})
    for (float& f : *x) f = u(gen);
  std::vector<std::int64_t> keys(static_cast<std::size_t>(S));
  std::iota(keys.begin(), keys.end(), 0);
  std::vector<std::int32_t> q_doc;
  for (const std::int64_t p : layout.positions()) q_doc.push_back(row[static_cast<std::size_t>(p)]);
  // Processor time, not wall time: the machine is shared, and a rank's own work is what the
  // layout decides (one kernel thread, so the process's time is the kernel's).
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const std::clock_t t0 = std::clock();
    origami::kernels::attention_forward(s, q.data(), k.data(), v.data(), layout.positions().data(),
                                        keys.data(), {q_doc.data(), row.data()}, 0.125f,
                                        out.data(), lse.data());
    best = std::min(best, static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t S = 16384, rows = 64, time_rows = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--seq") S = std::atoll(argv[i + 1]);
    else if (a == "--rows") rows = std::atoll(argv[i + 1]);
    else if (a == "--time-rows") time_rows = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s (use --seq, --rows, --time-rows)\n", argv[i]);
      return 2;
    }
  }
  if (S < 64 || S % 16 != 0 || rows < 1 || time_rows < 0 || time_rows > rows) {
    std::fprintf(stderr, "need --seq >= 64, a multiple of 16, --rows >= 1 and "
                         "0 <= --time-rows <= --rows\n");
    return 2;
  }
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
  if (time_rows == 0) return 0;
  origami::kernels::set_thread_count(1);
  std::printf("\nmeasured attention forward per rank, first %lld rows, d = 64, one head, one "
              "thread, processor time, SIMD %s\n",
              static_cast<long long>(time_rows), origami::kernels::simd_target().c_str());
  std::printf("%3s  %-10s  %24s  %22s\n", "D", "layout", "time imbalance (max/mean-1)",
              "slowest rank, summed");
  for (const int D : {2, 4, 8}) {
    for (const TokenLayoutKind kind : {TokenLayoutKind::Zigzag, TokenLayoutKind::Balanced}) {
      double imbalance = 0, slowest = 0;
      for (std::int64_t r = 0; r < time_rows; ++r) {
        const std::vector<std::int32_t>& row = data[static_cast<std::size_t>(r)];
        double most = 0, sum = 0;
        for (int rank = 0; rank < D; ++rank) {
          const TokenLayout layout = kind == TokenLayoutKind::Balanced
                                         ? TokenLayout::balanced_for(S, D, rank, row.data(), 1)
                                         : TokenLayout(kind, S, D, rank);
          const double t = rank_attention_seconds(layout, row);
          most = std::max(most, t);
          sum += t;
        }
        imbalance += (most / (sum / D) - 1.0) / static_cast<double>(time_rows);
        slowest += most;
      }
      std::printf("%3d  %-10s  %23.1f%%  %19.1f ms\n", D,
                  origami::parallel::token_layout_name(kind).c_str(), 100.0 * imbalance,
                  1e3 * slowest);
    }
  }
  return 0;
}
