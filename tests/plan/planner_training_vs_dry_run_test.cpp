// The planner's predict() against the engine's dry run (issue 6 item 5, second bullet) on
// 7B-class widths (h 4096, 32 heads, f 11008, V 32000) over 8 ranks: one table of layouts,
// sequence lengths, precision profiles and recompute policies. For every row, on world rank 0
// and on the last rank: every tracker category's peak within 5% of the dry run's, the bytes
// sent per communicator and operation EXACTLY equal (TSP's embedding all-to-all: calls only,
// its bytes depend on the ids), and the step time within 5% of the virtual clock, the
// planner's hardware set to the dry run's flop rate and links.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "origami/core/memory_tracker.h"
#include "origami/dryrun/training.h"
#include "origami/model/config.h"
#include "origami/parallel/parallel_config.h"
#include "origami/parallel/registry.h"
#include "origami/plan/predict.h"

#include "../sanitizers.h"

namespace origami {
namespace {

struct Row {
  std::string name;
  const char* strategy;  // make_parallel_config's words
  int degree;
  const char* mesh;
  plan::Layout layout;
  std::int64_t batch, seq;
  const char* precision;
  const char* recompute;
  int layers;
  std::int64_t grad_accum = 1;
  // Another model, rate or links than the 7B widths at the dry run's defaults.
  std::optional<ModelConfig> model = std::nullopt;
  double flop_rate = 100e12;  // the dry run's default per-rank FLOP rate
  std::optional<comm::LinkModel> link = std::nullopt;
};

// 7B widths with `layers` layers: the per-layer costs are linear in L, so fewer layers of the
// same widths check the same formulas at a fraction of the simulation time.
ModelConfig model_7b(int layers, std::int64_t seq) {
  ModelConfig m = model_preset("7b");
  m.num_hidden_layers = layers;
  m.max_position_embeddings = seq;  // RoPE tables for the row's sequence
  return m;
}

plan::Hardware hardware_of(const DryRunOptions& o) {
  plan::Hardware hw;
  hw.name = "dry-run";
  hw.memory_bytes = std::int64_t{1} << 50;
  hw.peak_flops_fp32 = hw.peak_flops_bf16 = o.flop_rate;
  hw.achievable = 1;
  hw.intra = {o.link.intra_alpha_s, o.link.intra_beta_Bps};
  hw.inter = {o.link.inter_alpha_s, o.link.inter_beta_Bps};
  hw.devices_per_node = o.link.devices_per_node;
  hw.runtime_overhead_bytes = 0;
  return hw;
}

// The engine's communicator names -> the planner's axes (docs/planner.md, "The call").
std::string planner_axis(const std::string& comm, bool tsp) {
  if (tsp && comm == "sp") return "tsp";
  if (comm == "tsp-shards") return "tsp_shards";
  if (comm == "tsp-grads") return "tsp_grads";
  return comm;
}

// The size of the planner axis a "axis/op" key names.
int axis_size(const plan::Layout& l, const std::string& key) {
  const std::string axis = key.substr(0, key.find('/'));
  if (axis == "dp") return l.dp;
  if (axis == "tp") return l.tp;
  if (axis == "sp") return l.sp;
  return l.tsp;
}

struct Worst {
  double memory = 0, step = 0;
  std::string memory_at, step_at;
};

void check_row(const Row& row, Worst& worst) {
  SCOPED_TRACE(row.name);
  const ModelConfig m = row.model ? *row.model : model_7b(row.layers, row.seq);
  const bool tsp = std::string(row.strategy) == "tsp";
  parallel::ParallelConfig pc = parallel::make_parallel_config(
      row.strategy, row.degree, row.mesh, false, parallel::TokenLayoutKind::Zigzag);
  pc.tsp_schedule = row.layout.tsp_schedule;  // TSP's allgather rows
  DryRunOptions o;
  o.seq = row.seq;
  o.batch = row.batch;
  o.grad_accum = row.grad_accum;
  o.recompute = row.recompute;
  o.precision = std::string(row.precision) == "bf16" ? Precision::bf16() : Precision::fp32();
  o.flop_rate = row.flop_rate;
  if (row.link) o.link = *row.link;
  const DryRunReport r = dry_run(m, pc, o);

  plan::Workload w;
  w.batch = row.batch;
  w.grad_accum = row.grad_accum;
  w.seq = row.seq;
  w.recompute = plan::parse_recompute(row.recompute);
  w.set_precision(o.precision);
  const plan::Prediction p = plan::predict(m, row.layout, w, hardware_of(o));

  const int last = static_cast<int>(r.ranks.size()) - 1;
  for (const int k : {0, last}) {
    SCOPED_TRACE("rank " + std::to_string(k));
    const DryRunRank& dr = r.ranks[static_cast<std::size_t>(k)];
    // Memory: every category within 5%.
    for (const auto& [cat, predicted] : p.categories()) {
      double measured = -1;
      for (int i = 0; i < kNumMemCategories; ++i)
        if (mem_category_name(static_cast<MemCategory>(i)) == cat)
          measured = double(dr.memory.peak[static_cast<std::size_t>(i)]);
      ASSERT_GE(measured, 0) << "no tracker category " << cat;
      const double rel = measured == 0 ? (predicted == 0 ? 0.0 : 1.0)
                                       : std::abs(double(predicted) - measured) / measured;
      EXPECT_LE(rel, 0.05) << cat << ": predicted " << predicted << " dry run " << measured;
      if (rel > worst.memory) {
        worst.memory = rel;
        worst.memory_at = row.name + " rank " + std::to_string(k) + " " + cat;
      }
    }
    // FLOPs: the closed form's executed FLOPs are the kernels' charges (docs/flops.md).
    EXPECT_NEAR(p.executed_flops_per_device, dr.flops, 1e-9 * dr.flops) << "executed FLOPs";
    // Bytes: the dry run's per communicator and op (group building on "world" excluded).
    std::map<std::string, comm::OpStats> measured;
    for (const auto& [name, st] : dr.comm) {
      if (name == "world") continue;  // building the groups
      for (const auto& [op, s] : st.ops)
        if (op != "split") measured[planner_axis(name, tsp) + "/" + op] += s;  // (groups too)
    }
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> predicted;  // calls, bytes
    for (const plan::CommCost& c : p.comm) {
      auto& e = predicted[c.op.axis + "/" + c.op.op];
      e.first += c.op.calls;
      e.second += c.op.bytes_sent;
    }
    for (const auto& [key, st] : measured) {
      // A call on a one-rank communicator (the step's scalars over dp = 1) moves nothing.
      if (st.calls == 0 || (st.bytes_sent == 0 && axis_size(row.layout, key) == 1)) continue;
      const auto it = predicted.find(key);
      if (it == predicted.end()) {
        ADD_FAILURE() << key << ": issued by the engine (" << st.calls << " calls, "
                      << st.bytes_sent << " B), not predicted";
        continue;
      }
      EXPECT_EQ(it->second.first, st.calls) << key << " calls";
      if (key != "tsp/all_to_all") {
        EXPECT_EQ(it->second.second, st.bytes_sent) << key << " bytes";
      }
    }
    for (const auto& [key, e] : predicted)
      if (e.first > 0 && !measured.count(key))
        ADD_FAILURE() << key << ": predicted (" << e.first << " calls), never issued";
  }
  // Step time within 5% of the virtual clock (the slowest rank's last step).
  const double rel = std::abs(p.step_s - r.step_s) / r.step_s;
  std::printf("%-30s step predicted %.4f s, dry run %.4f s (ratio %.4f)\n", row.name.c_str(),
              p.step_s, r.step_s, p.step_s / r.step_s);
  EXPECT_LE(rel, 0.05) << "step: predicted " << p.step_s << " dry run " << r.step_s;
  if (rel > worst.step) {
    worst.step = rel;
    worst.step_at = row.name;
  }
}

struct LayoutRow {
  const char* name;
  const char* strategy;
  int degree;
  const char* mesh;
  plan::Layout layout;
  std::int64_t batch;
};

const std::vector<LayoutRow>& layouts() {
  static const std::vector<LayoutRow> all = {
      {"tsp8", "tsp", 8, "", {.dp = 1, .tp = 1, .sp = 1, .tsp = 8, .sequence_parallel = false}, 1},
      {"tp8", "tp", 8, "", {.dp = 1, .tp = 8, .sp = 1, .tsp = 1, .sequence_parallel = false}, 1},
      {"tpsp8", "tpsp", 8, "", {.dp = 1, .tp = 8, .sp = 1, .tsp = 1, .sequence_parallel = true}, 1},
      {"sp8", "sp", 8, "", {.dp = 1, .tp = 1, .sp = 8, .tsp = 1, .sequence_parallel = false}, 1},
      {"tp2xsp4", "tp", 1, "tp=2,sp=4", {.dp = 1, .tp = 2, .sp = 4, .tsp = 1, .sequence_parallel = false}, 1},
      {"dp2xtsp4", "tsp", 1, "dp=2,tsp=4", {.dp = 2, .tp = 1, .sp = 1, .tsp = 4, .sequence_parallel = false}, 1},  // micro-batch 1 per replica
      // TSP's allgather schedule (parallel/strategies/tsp_allgather/schedule.h).
      {"tsp8-allgather", "tsp", 8, "", {.dp = 1, .tp = 1, .sp = 1, .tsp = 8, .sequence_parallel = false, .tsp_schedule = parallel::TspSchedule::Allgather}, 1}};
  return all;
}

using Names = std::vector<std::string>;
bool has(const Names& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

// The rows of the named layouts.
std::vector<Row> rows_of(const Names& names, std::int64_t seq,
                         const std::vector<const char*>& precisions,
                         const std::vector<const char*>& recomputes, int layers) {
  std::vector<Row> rows;
  for (const LayoutRow& l : layouts()) {
    if (!has(names, l.name)) continue;
    for (const char* prec : precisions)
      for (const char* rc : recomputes)
        rows.push_back({std::string(l.name) + " L" + std::to_string(layers) + " S" +
                            std::to_string(seq / 1024) + "K " + prec + " " + rc,
                        l.strategy, l.degree, l.mesh, l.layout, l.batch, seq, prec, rc, layers});
  }
  return rows;
}

void run_all(const std::vector<Row>& rows) {
  Worst worst;
  for (const Row& row : rows) check_row(row, worst);
  std::printf("worst memory deviation %.4f%% (%s); worst step deviation %.4f%% (%s)\n",
              100 * worst.memory, worst.memory_at.c_str(), 100 * worst.step,
              worst.step_at.c_str());
}

const Names kAll = {"tsp8", "tp8", "tpsp8", "sp8", "tp2xsp4", "dp2xtsp4"};

// Every layout, both profiles, every policy at 16K tokens, on two layers of the 7B widths
// (the per-layer terms are linear in L; at two layers the step's fixed part, embedding, head
// and gradient reductions, weighs 16x more than at 32, which the full depth checks below).
TEST(DryRunCheck, EveryLayoutProfileAndPolicyAt16k) {
#ifdef ORIGAMI_TESTS_SANITIZED
  run_all(rows_of(kAll, 16384, {"fp32"}, {"none"}, 1));
  run_all(rows_of(kAll, 16384, {"bf16"}, {"full"}, 1));
#else
  run_all(rows_of(kAll, 16384, {"fp32", "bf16"}, {"none", "mlp", "full"}, 2));
#endif
}

// 128K tokens: every layout, both profiles, two policies, two layers.
TEST(DryRunCheck, EveryLayoutAt128k) {
#ifdef ORIGAMI_TESTS_SANITIZED
  GTEST_SKIP() << "128K: Release only (the 16K rows run the same formulas under sanitizers)";
#else
  run_all(rows_of(kAll, 131072, {"fp32", "bf16"}, {"none", "full"}, 2));
#endif
}

// TSP's allgather rows beside broadcast-ring's (kAll leaves them out), two layers: 16K fp32
// none and bf16 full, 128K bf16 none and full.
TEST(DryRunCheck, TspAllgatherAt16kAnd128k) {
#ifdef ORIGAMI_TESTS_SANITIZED
  run_all(rows_of({"tsp8-allgather"}, 16384, {"bf16"}, {"full"}, 1));
#else
  std::vector<Row> rows = rows_of({"tsp8-allgather"}, 16384, {"fp32"}, {"none"}, 2);
  for (const Row& r : rows_of({"tsp8-allgather"}, 16384, {"bf16"}, {"full"}, 2)) rows.push_back(r);
  for (const Row& r : rows_of({"tsp8-allgather"}, 131072, {"bf16"}, {"none", "full"}, 2))
    rows.push_back(r);
  run_all(rows);
#endif
}

// Two micro-batches per step: the schedule twice, the step's reductions once.
TEST(DryRunCheck, GradientAccumulation) {
#ifdef ORIGAMI_TESTS_SANITIZED
  std::vector<Row> rows = rows_of({"tsp8", "tp2xsp4"}, 16384, {"bf16"}, {"mlp"}, 1);
#else
  std::vector<Row> rows = rows_of(kAll, 16384, {"bf16"}, {"mlp"}, 1);
#endif
  for (Row& r : rows) {
    r.grad_accum = 2;
    r.name += " accum 2";
  }
  run_all(rows);
}

// Slow links at two ranks, where every transfer is longer than the compute that could hide it
// (docs/results-planner-wallclock.md's model and rate, beta 50 and 30 MB/s): the rules'
// edges, e.g. a backward ring's first and last steps carrying one hop, not two.
// Kv heads replicated: the 7B widths over 2 kv heads, so that tsp 8, tp 8 and tp-sp 8 each
// hold one kv head per rank, replicated over 4 ranks (the k/v gradients summed over "tp-kv" /
// "tsp-kv", the replicas' K/V projections executed by each).
TEST(DryRunCheck, ReplicatedKvHeads) {
  const std::int64_t seq = 16384;
  ModelConfig m = model_7b(2, seq);
  m.num_key_value_heads = 2;
  std::vector<Row> rows;
#ifdef ORIGAMI_TESTS_SANITIZED
  const std::vector<const char*> recomputes = {"full"};
#else
  const std::vector<const char*> recomputes = {"none", "full"};
#endif
  for (Row row : rows_of({"tsp8", "tp8", "tpsp8"}, seq, {"bf16"}, recomputes, 2)) {
    row.name += " kv2";
    row.model = m;
    rows.push_back(row);
  }
  run_all(rows);
}

TEST(DryRunCheck, SlowLinksAtTwoRanks) {
  ModelConfig small;
  small.vocab_size = 4096;
  small.hidden_size = 256;
  small.intermediate_size = 688;
  small.num_hidden_layers = 4;
  small.num_attention_heads = 4;
  small.num_key_value_heads = 2;
  small.max_position_embeddings = 2048;
  std::vector<Row> rows;
  for (const double beta : {50e6, 30e6}) {
    comm::LinkModel link;
    link.intra_alpha_s = 30e-6;
    link.intra_beta_Bps = beta;
    link.devices_per_node = 2;
    for (const char* rc : {"none", "full"}) {
      const std::string tag = fmt::format(" beta {} MB/s {}", beta / 1e6, rc);
      rows.push_back({"tsp2" + tag, "tsp", 2, "", {.dp = 1, .tp = 1, .sp = 1, .tsp = 2, .sequence_parallel = false}, 1, 2048, "fp32", rc, 4, 1,
                      small, 87.5e9, link});
      rows.push_back({"tp2" + tag, "tp", 2, "", {.dp = 1, .tp = 2, .sp = 1, .tsp = 1, .sequence_parallel = false}, 1, 2048, "fp32", rc, 4, 1,
                      small, 87.5e9, link});
      rows.push_back({"sp2" + tag, "sp", 2, "", {.dp = 1, .tp = 1, .sp = 2, .tsp = 1, .sequence_parallel = false}, 1, 2048, "fp32", rc, 4, 1,
                      small, 87.5e9, link});
      rows.push_back({"dp2" + tag, "dp", 2, "", {.dp = 2, .tp = 1, .sp = 1, .tsp = 1, .sequence_parallel = false}, 1, 2048, "fp32", rc, 4, 1,
                      small, 87.5e9, link});
    }
  }
  run_all(rows);
}

// Tied embeddings (Llama 3.2's choice) on the 7B widths: one vocabulary table per rank, its
// gradient reduced once; every layout, fp32, 16K tokens, two layers.
TEST(DryRunCheck, TiedEmbeddingsAt16k) {
#ifdef ORIGAMI_TESTS_SANITIZED
  std::vector<Row> rows = rows_of({"tsp8", "tp8"}, 16384, {"fp32"}, {"none"}, 1);
#else
  std::vector<Row> rows = rows_of(kAll, 16384, {"fp32"}, {"none"}, 2);
#endif
  for (Row& r : rows) {
    ModelConfig m = model_7b(r.layers, r.seq);
    m.tie_word_embeddings = true;
    r.model = m;
    r.name += " tied";
  }
  run_all(rows);
}

// The whole 7B (32 layers), every layout, bf16, recompute none.
TEST(DryRunCheck, Full7bAt16k) {
#ifdef ORIGAMI_TESTS_SANITIZED
  GTEST_SKIP() << "32 layers: Release only (the 16K rows run the same formulas under sanitizers)";
#else
  run_all(rows_of(kAll, 16384, {"bf16"}, {"none"}, 32));
#endif
}

}  // namespace
}  // namespace origami
