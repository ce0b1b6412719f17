// The planner's inference rows (plan/inference.h) against the inference dry run
// (dryrun/inference.h: the real engine on unbacked tensors, virtual clocks) at 7B widths (h 4096,
// 32 heads, f 11008, V 32000; two layers: the per-layer terms are linear in L) for D = 1, 2, 8
// (and 8 over 4 and 2 kv heads: replicated), prompts of 4K..32K tokens, B = 1 and 4, fp32 and
// bf16, a memory bandwidth that makes decode memory-bound (and one row without it). For every row,
// on rank 0 and on the last rank: every tracker category's peak of each phase within 5% of the
// prediction; the K/V all-gathers' and the decode all-reduces' bytes exactly the predicted ones
// (the last rows' broadcasts summed over the ranks; the argmax's per step); the prefill time and
// the decode time per token within 5% of the virtual clock (the slowest rank's), the planner's
// hardware set to the dry run's FLOP rate, memory bandwidth and links.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "origami/dryrun/inference.h"
#include "origami/plan/inference.h"

#include "../sanitizers.h"

namespace origami {
namespace {

constexpr double kTolerance = 0.05;
constexpr std::int64_t kNewTokens = 4;  // 3 decode steps

struct Row {
  int D;
  std::int64_t batch, seq;
  const char* precision;
  double memory_bw = 2e12;  // B/s; 0: FLOPs only
  int layers = 2;
  std::int64_t head_dim = 0;  // an explicit head_dim (0: h / heads = 128)
  std::int64_t kv_heads = 0;  // 0: the preset's (32); fewer than D: each kv head replicated
};

std::string name_of(const Row& r) {
  return fmt::format("D{} B{} S{}K {}{} L{}{}{}", r.D, r.batch, r.seq / 1024, r.precision,
                     r.memory_bw > 0 ? "" : " no-bw", r.layers,
                     r.head_dim > 0 ? fmt::format(" head_dim {}", r.head_dim) : "",
                     r.kv_heads > 0 ? fmt::format(" kv{}", r.kv_heads) : "");
}

plan::Hardware hardware_of(const infer::InferDryRunOptions& o) {
  plan::Hardware hw;
  hw.name = "dry-run";
  hw.memory_bytes = std::int64_t{1} << 50;
  hw.peak_flops_fp32 = hw.peak_flops_bf16 = o.flop_rate;
  hw.achievable = 1;
  hw.memory_bw_Bps = o.memory_bw;
  hw.intra = {o.link.intra_alpha_s, o.link.intra_beta_Bps};
  hw.inter = {o.link.inter_alpha_s, o.link.inter_beta_Bps};
  hw.devices_per_node = o.link.devices_per_node;
  hw.runtime_overhead_bytes = 0;
  return hw;
}

constexpr std::array<MemCategory, 6> kCategories{
    MemCategory::Parameters,  MemCategory::KvCache,     MemCategory::CommBuffers,
    MemCategory::Workspace,   MemCategory::Activations, MemCategory::Logits};
std::array<std::int64_t, 6> predicted(const plan::InferenceMemory& m) {
  return {m.parameters, m.kv_cache, m.comm_buffers, m.workspace, m.activations, m.logits};
}

struct Worst {
  double memory = 0, prefill = 0, decode = 0;
  std::string memory_at, prefill_at, decode_at;
  void note(double& worst, std::string& at, double rel, const std::string& where) {
    if (rel >= worst) {
      worst = rel;
      at = where;
    }
  }
};

double relative(double want, double got) {
  return got == 0 ? (want == 0 ? 0.0 : 1.0) : std::abs(want - got) / got;
}

void check_row(const Row& row, Worst& worst) {
  const std::string name = name_of(row);
  SCOPED_TRACE(name);
  ModelConfig m = model_preset("7b");
  m.num_hidden_layers = row.layers;
  m.explicit_head_dim = row.head_dim;
  if (row.kv_heads > 0) m.num_key_value_heads = row.kv_heads;
  m.max_position_embeddings = row.seq + kNewTokens;
  infer::InferDryRunOptions o;
  o.prompt_tokens = row.seq;
  o.batch = row.batch;
  o.new_tokens = kNewTokens;
  o.precision = Precision::parse(row.precision);
  o.memory_bw = row.memory_bw;
  const infer::InferDryRunReport r = infer::infer_dry_run(m, row.D, o);

  plan::Workload w;
  w.batch = row.batch;
  w.seq = row.seq;
  w.set_precision(o.precision);
  const plan::InferenceRow p = plan::predict_inference(m, row.D, w, hardware_of(o), kNewTokens);

  const int last = row.D - 1;
  for (const int k : {0, last}) {
    SCOPED_TRACE(fmt::format("rank {}", k));
    const auto& pre = r.prefill[static_cast<std::size_t>(k)];
    const auto& dec = r.decode[static_cast<std::size_t>(k)];
    for (const auto& [phase, want, got] :
         {std::tuple{"prefill", predicted(p.prefill), &pre}, {"decode", predicted(p.decode), &dec}})
      for (std::size_t i = 0; i < kCategories.size(); ++i) {
        const auto measured = double(got->memory.peak[static_cast<std::size_t>(kCategories[i])]);
        const double rel = relative(double(want[i]), measured);
        const std::string cat(mem_category_name(kCategories[i]));
        EXPECT_LE(rel, kTolerance) << phase << " " << cat << ": predicted " << want[i]
                                   << ", dry run " << measured;
        worst.note(worst.memory, worst.memory_at, rel,
                   fmt::format("{} rank {} {} {}", name, k, phase, cat));
      }
    // Bytes: the axis ("tsp") K/V gathers of prefill; decode's all-reduces per step.
    const std::int64_t steps = r.decode_steps;
    const auto axis_op = [](const DryRunRank& d, const char* op) {
      const auto it = d.comm.find("tsp");
      return it == d.comm.end() ? comm::OpStats{} : it->second.op(op);
    };
    EXPECT_EQ(axis_op(pre, "all_gather").bytes_sent, p.traffic.prefill_kv_gathers);
    EXPECT_EQ(axis_op(dec, "all_reduce").bytes_sent, steps * p.traffic.decode_all_reduce);
    // The argmax's ring of B pairs splits evenly only when D divides B: else per rank the
    // bytes depend on which chunks are empty, and only their sum over ranks is checked (below).
    if (row.batch % row.D == 0) {
      EXPECT_EQ(axis_op(dec, "all_reduce_maxloc").bytes_sent, steps * p.traffic.decode_argmax);
    }
    if (row.D > 1) {
      EXPECT_EQ(axis_op(pre, "all_to_all").calls, 3);
    }
  }
  // Over all ranks: the last rows' broadcasts (each rank's share depends on which holds the
  // row) and the argmax's bytes.
  std::int64_t last_rows = 0;
  for (const DryRunRank& d : r.prefill) {
    const auto it = d.comm.find("tsp");
    if (it != d.comm.end()) last_rows += it->second.op("broadcast").bytes_sent;
  }
  EXPECT_EQ(last_rows, p.traffic.prefill_last_rows_all_ranks);
  std::int64_t argmax = 0;
  for (const DryRunRank& d : r.decode) {
    const auto it = d.comm.find("tsp");
    if (it != d.comm.end()) argmax += it->second.op("all_reduce_maxloc").bytes_sent;
  }
  EXPECT_EQ(argmax, r.decode_steps * row.D * p.traffic.decode_argmax);

  if (std::getenv("ORIGAMI_DRY_CHECK_VERBOSE"))
    for (const auto& [phase, ranks] : {std::pair{"prefill", &r.prefill}, {"decode", &r.decode}}) {
      const DryRunRank& k = ranks->front();
      std::printf("  %s rank 0: compute %.6f s;", phase, k.compute_s);
      for (const auto& [op, st] : k.comm_total.ops)
        if (st.time_s > 0) std::printf(" %s %.6f/%.6f s", op.c_str(), st.time_s, st.exposed_s);
      std::printf("\n");
    }
  const double rp = relative(p.prefill_s, r.prefill_s), rd = relative(p.decode_token_s, r.decode_token_s);
  std::printf("%-28s prefill predicted %.5f s, dry run %.5f s (ratio %.4f); decode/token %.6f s, "
              "%.6f s (ratio %.4f)\n",
              name.c_str(), p.prefill_s, r.prefill_s, p.prefill_s / r.prefill_s, p.decode_token_s,
              r.decode_token_s, p.decode_token_s / r.decode_token_s);
  EXPECT_LE(rp, kTolerance) << "prefill: predicted " << p.prefill_s << " dry run " << r.prefill_s;
  EXPECT_LE(rd, kTolerance) << "decode per token: predicted " << p.decode_token_s << " dry run "
                            << r.decode_token_s;
  worst.note(worst.prefill, worst.prefill_at, rp, name);
  worst.note(worst.decode, worst.decode_at, rd, name);
}

void run_all(const std::vector<Row>& rows) {
  Worst worst;
  for (const Row& row : rows) check_row(row, worst);
  std::printf("worst memory deviation %.4f%% (%s); prefill %.4f%% (%s); decode %.4f%% (%s)\n",
              100 * worst.memory, worst.memory_at.c_str(), 100 * worst.prefill,
              worst.prefill_at.c_str(), 100 * worst.decode, worst.decode_at.c_str());
}

std::vector<Row> matrix(const std::vector<int>& degrees, const std::vector<std::int64_t>& seqs,
                        const std::vector<std::int64_t>& batches,
                        const std::vector<const char*>& precisions) {
  std::vector<Row> rows;
  for (int D : degrees)
    for (std::int64_t S : seqs)
      for (std::int64_t B : batches)
        for (const char* prec : precisions) rows.push_back({D, B, S, prec});
  return rows;
}

TEST(InferenceDryRunCheck, DegreesPromptsBatchesProfiles) {
#ifdef ORIGAMI_TESTS_SANITIZED
  run_all(matrix({1, 2, 8}, {4096}, {1, 4}, {"bf16"}));
#else
  run_all(matrix({1, 2, 8}, {4096, 32768}, {1, 4}, {"fp32", "bf16"}));
#endif
}

// The whole 7B (32 layers) at 32K tokens on 8 ranks, both batches.
TEST(InferenceDryRunCheck, Full7b) {
#ifdef ORIGAMI_TESTS_SANITIZED
  GTEST_SKIP() << "32 layers: Release only (the 2-layer rows run the same formulas)";
#else
  run_all({{8, 1, 32768, "bf16", 2e12, 32}, {8, 4, 32768, "bf16", 2e12, 32}});
#endif
}

// Kv heads replicated (7B widths with 4 and 2 kv heads at D = 8: 2·Hkv and 4·Hkv): each rank
// projects, gathers and caches its head group's one kv head; the planner counts that cache and
// the replicated W_K, W_V rows per rank as the engine allocates them.
TEST(InferenceDryRunCheck, KvHeadsReplicated) {
  run_all({{8, 4, 4096, "bf16", 2e12, 2, 0, 4}, {8, 1, 8192, "fp32", 2e12, 2, 0, 2}});
}

// Without a memory bandwidth every kernel charges its FLOPs: decode is then compute- and
// latency-bound, and the planner's per-kernel rule must follow that too.
TEST(InferenceDryRunCheck, FlopsOnly) {
  run_all({{8, 4, 16384, "bf16", 0}, {2, 1, 8192, "fp32", 0}});
}

// An explicit head_dim (32 heads x 160 = 5120 beside h 4096: q, kv and the K/V cache wider
// than h / heads gives): the planner's shapes are the engine's.
TEST(InferenceDryRunCheck, ExplicitHeadDim) {
  run_all({{2, 1, 4096, "bf16", 2e12, 2, 160}, {8, 4, 4096, "fp32", 2e12, 2, 160}});
}

}  // namespace
}  // namespace origami
