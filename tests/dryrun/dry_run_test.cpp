// The dry run (dryrun/training.h) against real runs of the same path, its precision profiles,
// and a 7B-class model on 8 simulated ranks.
#include "origami/dryrun/training.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "../parallel/harness.h"
#include "../sanitizers.h"
#include "origami/data/dataset.h"
#include "origami/data/token_file.h"
#include "origami/model/config.h"
#include "origami/parallel/registry.h"
#include "origami/plan/document_imbalance.h"
#include "origami/plan/predict.h"

namespace origami {
namespace {

using parallel::make_parallel_config;
using parallel::TokenLayoutKind;

struct Layout {
  const char* name;
  parallel::ParallelConfig plan;
};

std::vector<Layout> small_layouts() {
  const auto z = TokenLayoutKind::Zigzag;
  return {
      {"single", make_parallel_config("single", 1, "", false, z)},
      {"dp2", make_parallel_config("dp", 2, "", false, z)},
      {"tp2", make_parallel_config("tp", 2, "", false, z)},
      {"tpsp2", make_parallel_config("tpsp", 2, "", false, z)},
      {"sp2", make_parallel_config("sp", 2, "", false, z)},
      {"tp2xsp2", make_parallel_config("tp", 1, "tp=2,sp=2", false, z)},
      {"tsp2", make_parallel_config("tsp", 2, "", false, z)},
      {"tsp4", make_parallel_config("tsp", 4, "", false, z)},
      {"dp2xtsp2", make_parallel_config("tsp", 1, "dp=2,tsp=2", false, z)},
  };
}

// h 64 and 4 heads: every weight and activation is above the dry run's backed threshold, so
// the unbacked paths run; V 97 pads under tp.
ModelConfig small_model() {
  return parity::make_model(97, 64, 96, 4, 4, 2);
}

// `timing_slack`: bytes by which the communication-buffer (and so the total) peak may differ.
// TSP's dP_j reduces are pipelined chains whose staging lives while a chunk is in flight; in
// the dry run every transfer completes at once, so that staging overlaps the other buffers
// differently (docs/tsp.md: "up to A of reduce staging", A = one packed attention shard).
// Everything else is exact.
void expect_same_accounting(const DryRunReport& dry, const DryRunReport& real,
                            const std::string& what, std::int64_t timing_slack = 0) {
  ASSERT_EQ(dry.ranks.size(), real.ranks.size()) << what;
  for (std::size_t r = 0; r < dry.ranks.size(); ++r) {
    const DryRunRank &d = dry.ranks[r], &e = real.ranks[r];
    for (int c = 0; c < kNumMemCategories; ++c) {
      const auto i = static_cast<std::size_t>(c);
      if (static_cast<MemCategory>(c) == MemCategory::CommBuffers) {
        EXPECT_LE(std::abs(d.memory.peak[i] - e.memory.peak[i]), timing_slack)
            << what << " rank " << r << " peak communication buffers";
      } else {
        EXPECT_EQ(d.memory.peak[i], e.memory.peak[i])
            << what << " rank " << r << " peak " << mem_category_name(static_cast<MemCategory>(c));
      }
      EXPECT_EQ(d.memory.current[i], e.memory.current[i])
          << what << " rank " << r << " current " << mem_category_name(static_cast<MemCategory>(c));
    }
    EXPECT_LE(std::abs(d.memory.peak_total - e.memory.peak_total), timing_slack)
        << what << " rank " << r << " peak total";
    ASSERT_EQ(d.comm.size(), e.comm.size()) << what << " rank " << r;
    for (const auto& [axis, ds] : d.comm) {
      ASSERT_TRUE(e.comm.count(axis)) << what << " rank " << r << " axis " << axis;
      const comm::CommStats& es = e.comm.at(axis);
      ASSERT_EQ(ds.ops.size(), es.ops.size()) << what << " rank " << r << " axis " << axis;
      for (const auto& [kind, o] : ds.ops) {
        const comm::OpStats& x = es.op(kind);
        EXPECT_EQ(o.calls, x.calls) << what << " rank " << r << " " << axis << " " << kind;
        EXPECT_EQ(o.bytes_sent, x.bytes_sent)
            << what << " rank " << r << " " << axis << " " << kind;
        EXPECT_EQ(o.bytes_received, x.bytes_received)
            << what << " rank " << r << " " << axis << " " << kind;
      }
    }
  }
}

// Runs layout `l` dry and executed (sequences of 32, micro-batch 2, 2 steps of `micro`
// micro-batches) and expects the same accounting; returns the dry run's report.
DryRunReport expect_dry_equals_real(const ModelConfig& m, const Layout& l, const char* recompute,
                                    std::int64_t micro) {
  DryRunOptions o;
  o.seq = 32;
  o.batch = 2;
  o.grad_accum = micro;
  o.steps = 2;
  o.recompute = recompute;
  const DryRunReport dry = dry_run(m, l.plan, o);
  o.execute = true;
  const DryRunReport real = dry_run(m, l.plan, o);
  // One packed attention shard of this layout: 2(H + Kv)/D head rows of h, fp32.
  const std::int64_t shard_bytes = l.plan.is_tsp()
                                       ? 2 * (m.num_attention_heads + m.num_key_value_heads) /
                                             l.plan.tsp * m.head_dim() * m.hidden_size * 4
                                       : 0;
  expect_same_accounting(dry, real, std::string(l.name) + " recompute " + recompute, shard_bytes);
  EXPECT_EQ(real.step_s, 0) << l.name;  // a real run has no virtual clock
  return dry;
}

// (a) The dry run allocates and communicates exactly what a real run of the same code does.
TEST(DryRun, EqualsARealRunForEveryStrategy) {
  const ModelConfig m = small_model();
  for (const Layout& l : small_layouts()) {
    for (const char* recompute : {"none", "mlp", "full"}) {
      const DryRunReport dry = expect_dry_equals_real(m, l, recompute, 2);
      // Something was moved and allocated at all (the comparison is not vacuous).
      EXPECT_GT(dry.ranks[0].memory.peak[static_cast<std::size_t>(MemCategory::Activations)], 0);
      if (l.plan.world() > 1) {
        EXPECT_GT(dry.ranks[0].comm_total.total().bytes_sent, 0) << l.name;
      }
      EXPECT_GT(dry.step_s, 0) << l.name;
    }
  }
}

// (a') Pipeline stages: each rank runs its stage's 1F1B order (parallel/rank_model_pipeline.cpp),
// and the dry run of a stage allocates and sends exactly what its real run does, per
// category: a sent activation or gradient is freed at a fixed point of the stage's order (the
// neighbour's reply), not when a send happens to be found done. pp 2 (one layer per stage)
// and pp 2 x tsp 2, over 3 micro-batches (m > p), and interleaved pp 2 x 2 chunks over 4,
// under every recompute policy; stage 0 holds more passes in flight than the last stage.
TEST(DryRun, EqualsARealRunPerPipelineStage) {
  const ModelConfig m = small_model();
  const auto z = TokenLayoutKind::Zigzag;
  // Interleaved 1F1B (two chunks a rank): a pass's output may return to the rank it came
  // from, so a send's release point can be the very pass that consumed it (reply_after).
  parallel::ParallelConfig interleaved = make_parallel_config("dp", 1, "pp=2", false, z);
  interleaved.pp_virtual = 2;
  const std::vector<Layout> staged = {
      {"pp2", make_parallel_config("dp", 1, "pp=2", false, z)},
      {"pp2xtsp2", make_parallel_config("tsp", 1, "pp=2,tsp=2", false, z)},
      {"pp2_virtual2", interleaved}};
  std::vector<const char*> policies = {"none", "mlp", "full"};
#ifdef ORIGAMI_TESTS_SANITIZED
  policies = {"none", "full"};
#endif
  for (const Layout& l : staged)
    for (const char* recompute : policies) {
      // Micro-batches: 3 (m > p), or 4 under interleaving (a multiple of pp), with a layer
      // and a layer per chunk (4 layers).
      const bool chunks = l.plan.pp_virtual > 1;
      const DryRunReport dry = expect_dry_equals_real(
          chunks ? parity::make_model(97, 64, 96, 4, 2, 4) : m, l, recompute, chunks ? 4 : 3);
      const std::string what = std::string(l.name) + " recompute " + recompute;
      const std::size_t last = dry.ranks.size() - 1;  // a rank of the last stage
      ASSERT_TRUE(dry.ranks[0].comm.count("pp") && dry.ranks[last].comm.count("pp")) << what;
      EXPECT_GT(dry.ranks[0].comm.at("pp").op("send").bytes_sent, 0) << what;     // activations
      EXPECT_GT(dry.ranks[last].comm.at("pp").op("send").bytes_sent, 0) << what;  // gradients
      if (std::string(recompute) == "none") {
        EXPECT_GT(dry.ranks[0].memory.peak[static_cast<std::size_t>(MemCategory::Activations)],
                  dry.ranks[last].memory.peak[static_cast<std::size_t>(MemCategory::Activations)])
            << what;
      }
    }
}

// (a'') Packed documents (`train --dry-run --document-masking --data PREFIX`): the dry run reads
// the run's own rows, so each rank's attention kernels charge the visible pairs of its queries
// within their documents. Against the same rows: memory and traffic equal a real (executed)
// run's; the ranks' attention FLOPs sum to the pairs counted from the rows (every head, forward
// and 2.5x backward, every layer), the busiest rank's over the mean's is the planner's predicted
// imbalance for these rows (plan::predict with the rows as its document sample), and the masked
// work is below the synthetic rows' full causal one.
TEST(DryRun, PackedDocumentsChargeTheirMaskedAttentionPerRank) {
  const ModelConfig m = small_model();
  const std::string prefix = ::testing::TempDir() + "origami_dry_run_docs_" +
                             std::to_string(::getpid());
  {
    data::TokenFileWriter w(prefix, m.vocab_size, 0);
    std::mt19937 gen(42);
    std::uniform_int_distribution<int> length(1, 30), id(0, 96);
    for (int d = 0; d < 40; ++d) {
      std::vector<std::int32_t> doc(static_cast<std::size_t>(length(gen)));
      for (std::int32_t& t : doc) t = id(gen);
      w.add_document(doc);
    }
    w.finish();
  }
  data::DataOptions masked;
  masked.document_masking = true;
  const data::TokenDataset dataset = data::open_for_training(prefix, masked, m.vocab_size, 48);
  const auto z = TokenLayoutKind::Zigzag, b = TokenLayoutKind::Balanced;
  std::vector<Layout> layouts{Layout{"sp2", make_parallel_config("sp", 2, "", false, z)},
                              Layout{"tsp4 balanced", make_parallel_config("tsp", 4, "", false, b)}};
#ifndef ORIGAMI_TESTS_SANITIZED  // (the sanitizers' build: the two above, a zigzag and a balanced)
  layouts.push_back({"single", make_parallel_config("single", 1, "", false, z)});
  layouts.push_back({"sp3 balanced", make_parallel_config("sp", 3, "", false, b)});
  layouts.push_back({"tp2xsp2", make_parallel_config("tp", 1, "tp=2,sp=2", false, z)});
  layouts.push_back({"tsp2", make_parallel_config("tsp", 2, "", false, z)});
#endif
  for (const Layout& l : layouts) {
    DryRunOptions o;
    o.seq = 48;
    o.batch = 2;
    o.data = &dataset;
    const DryRunReport dry = dry_run(m, l.plan, o);
    DryRunOptions x = o;
    x.execute = true;
    expect_same_accounting(dry, dry_run(m, l.plan, x), l.name,
                           l.plan.is_tsp() ? 2 * 8 / l.plan.tsp * 16 * 64 * 4 : 0);
    DryRunOptions synthetic = o;
    synthetic.data = nullptr;
    const DryRunReport causal = dry_run(m, l.plan, synthetic);
    // The rows it read: the trainer's batch 0 of 2 sequences.
    MemoryTracker tracker;
    const data::Batch rows = dataset.rows(o.seed, 0, 2, 0, 2, 48, tracker);
    double pairs = 0;
    for (std::int64_t r = 0; r < 2; ++r)
      for (std::int64_t s = 0; s < 48; ++s)
        pairs += static_cast<double>(rows.positions.data<std::int64_t>()[r * 48 + s] + 1);
    // Positions restart at each document (and at a row's start): a query at position p of its
    // document sees p + 1 keys.
    double sum = 0, most = 0, causal_sum = 0;
    for (std::size_t r = 0; r < dry.ranks.size(); ++r) {
      sum += dry.ranks[r].attention_flops;
      most = std::max(most, dry.ranks[r].attention_flops);
      causal_sum += causal.ranks[r].attention_flops;
    }
    const double per_pair = 3.5 * 4 * m.head_dim() * m.num_attention_heads * m.num_hidden_layers;
    EXPECT_DOUBLE_EQ(sum, per_pair * pairs) << l.name;
    EXPECT_DOUBLE_EQ(causal_sum, per_pair * 2 * 48 * 49 / 2) << l.name;
    EXPECT_LT(sum, 0.5 * causal_sum) << l.name;
    auto sample = std::make_shared<plan::DocumentSample>();
    sample->layout = l.plan.layout;
    for (std::int64_t r = 0; r < 2; ++r)
      sample->rows.emplace_back(rows.documents.data<std::int32_t>() + r * 48,
                                rows.documents.data<std::int32_t>() + (r + 1) * 48);
    plan::Workload w;
    w.seq = 48;
    w.batch = 2;
    w.documents = sample;
    const plan::Prediction p = plan::predict(m, l.plan, w, plan::hardware_preset("cpu"));
    const double world = l.plan.world();
    EXPECT_NEAR(p.attention_flops_per_device * world, sum, 1e-12 * sum) << l.name;
    EXPECT_NEAR(p.attention_imbalance, most / (sum / world) - 1.0, 1e-12) << l.name;
    if (l.plan.token_degree() > 1 && l.plan.layout == z) {
      EXPECT_GT(p.attention_imbalance, 0.01) << l.name;
    }
  }
  std::remove((prefix + ".tokens").c_str());
  std::remove((prefix + ".index").c_str());
}

// (a') The same with each kv head replicated (4 heads over 2 kv heads at degree 4): the
// kv-replica groups' gradient sums and the replicated k/v blocks are accounted alike.
TEST(DryRun, EqualsARealRunWithKvHeadsReplicated) {
  const ModelConfig m = parity::make_model(97, 64, 96, 4, 2, 2);
  const auto z = TokenLayoutKind::Zigzag;
  for (const Layout& l : {Layout{"tp4", make_parallel_config("tp", 4, "", false, z)},
                          Layout{"tpsp4", make_parallel_config("tpsp", 4, "", false, z)},
                          Layout{"tsp4", make_parallel_config("tsp", 4, "", false, z)}}) {
    for (const char* recompute : {"none", "full"}) {
      DryRunOptions o;
      o.seq = 32;
      o.batch = 2;
      o.steps = 2;
      o.recompute = recompute;
      const DryRunReport dry = dry_run(m, l.plan, o);
      o.execute = true;
      const DryRunReport real = dry_run(m, l.plan, o);
      // One packed attention shard: H/D query heads and the one kv head, twice (K, V / Q, O).
      const std::int64_t shard_bytes =
          l.plan.is_tsp() ? 2 * (m.num_attention_heads / 4 + 1) * m.head_dim() * m.hidden_size * 4
                          : 0;
      expect_same_accounting(dry, real, std::string(l.name) + " kv2 recompute " + recompute,
                             shard_bytes);
      EXPECT_TRUE(dry.ranks[0].comm.count(l.plan.is_tsp() ? "tsp-kv" : "tp-kv")) << l.name;
    }
  }
}

// (c) Every layout charges the single device's FLOPs, summed over its ranks: the strategies
// split the same products, none skipped (a kernel whose output pointer is an unbacked
// tensor's null must still be charged: SP's output projection once was not). TSP's head
// ring recomputes each logits block in the backward: 2·h·V·T more (docs/tsp.md).
TEST(DryRun, EveryLayoutChargesTheSingleDevicesFlops) {
  const ModelConfig m = parity::make_model(96, 64, 96, 4, 4, 2);  // V 96: no padding up to 4
  for (const char* recompute : {"none", "mlp", "full"}) {
    DryRunOptions o;
    o.seq = 32;
    o.batch = 2;
    o.recompute = recompute;
    const auto total = [&](const parallel::ParallelConfig& plan) {
      // The same 2 sequences in all: o.batch is each dp replica's micro-batch.
      DryRunOptions job = o;
      job.batch = o.batch / plan.dp;
      double sum = 0;
      for (const DryRunRank& r : dry_run(m, plan, job).ranks) sum += r.flops;
      return sum;
    };
    const double single = total(small_layouts()[0].plan);
    const double head_again = 2.0 * 64 * 96 * 32 * 2;
    for (const Layout& l : small_layouts()) {
      const double expected = l.plan.is_tsp() ? single + head_again : single;
      EXPECT_NEAR(total(l.plan), expected, 1e-12 * expected) << l.name << " " << recompute;
    }
  }
}

std::int64_t peak(const DryRunRank& r, MemCategory c) {
  return r.memory.peak[static_cast<std::size_t>(c)];
}

// (b) The bf16 profile: parameters, activations and every float transfer at 2 bytes; gradients
// and logits unchanged; optimizer state = master copy (4) + two moments (8) per parameter.
TEST(DryRun, Bf16ProfileHalvesWeightsActivationsAndTraffic) {
  const ModelConfig m = small_model();
  for (const Layout& l : {small_layouts()[2], small_layouts()[6]}) {  // tp2, tsp2
    DryRunOptions o;
    o.seq = 32;
    o.batch = 2;
    const DryRunReport f = dry_run(m, l.plan, o);
    // bf16 gradients (--grad-reduce-dtype bf16): every fp32 message of the fp32 run at half
    // its bytes. With fp32 gradients the weight gradients' reductions keep their 4 bytes an
    // element (as the real run sends them), the rest is the same.
    o.precision = Precision::parse("bf16", "fp32");
    const DryRunReport b32 = dry_run(m, l.plan, o);
    o.precision = Precision::parse("bf16", "bf16");
    const DryRunReport b = dry_run(m, l.plan, o);
    for (std::size_t r = 0; r < f.ranks.size(); ++r) {
      const DryRunRank &x = f.ranks[r], &y = b.ranks[r], &y32 = b32.ranks[r];
      for (const auto& [kind, s] : y32.comm_total.ops) {
        const std::int64_t excess = s.bytes_sent - y.comm_total.op(kind).bytes_sent;
        if (kind == "all_reduce")  // the norms' gradients, summed under tsp (tp holds them whole)
          EXPECT_EQ(excess > 0, l.plan.is_tsp()) << l.name << " " << excess;
        else
          EXPECT_EQ(excess, 0) << l.name << " " << kind;
      }
      EXPECT_EQ(2 * peak(y, MemCategory::Parameters), peak(x, MemCategory::Parameters)) << l.name;
      EXPECT_EQ(peak(y32, MemCategory::Gradients), peak(x, MemCategory::Gradients)) << l.name;
      EXPECT_EQ(2 * peak(y, MemCategory::Gradients), peak(x, MemCategory::Gradients)) << l.name;
      EXPECT_EQ(2 * peak(y, MemCategory::OptimizerState), 3 * peak(x, MemCategory::OptimizerState))
          << l.name;
      EXPECT_EQ(2 * peak(y, MemCategory::Activations), peak(x, MemCategory::Activations)) << l.name;
      EXPECT_EQ(peak(y, MemCategory::Logits), peak(x, MemCategory::Logits)) << l.name;
      for (const auto& [kind, s] : x.comm_total.ops) {
        // Integer messages (split's group table, TSP's token ids and counts) keep their size.
        if (kind == "split" || kind == "all_to_all") continue;
        // all_reduce also carries the step's scalars (loss sum, label count, squared norms:
        // F64/I64, a few per step), which keep their 8 bytes: the excess is those bytes.
        const std::int64_t scalars = kind == "all_reduce" ? 64 : 0;
        const std::int64_t sent = 2 * y.comm_total.op(kind).bytes_sent - s.bytes_sent;
        const std::int64_t received = 2 * y.comm_total.op(kind).bytes_received - s.bytes_received;
        EXPECT_GE(sent, 0) << l.name << " " << kind;
        EXPECT_LE(sent, scalars) << l.name << " " << kind;
        EXPECT_GE(received, 0) << l.name << " " << kind;
        EXPECT_LE(received, scalars) << l.name << " " << kind;
      }
      EXPECT_LT(b.step_s, f.step_s) << l.name;  // same FLOPs, half the bytes on the links
    }
  }
}

// (d) A 7B-class model at 16K tokens on 8 ranks, TSP and TP: per-rank parameters are an
// eighth of the model's, plus the RMSNorm weights every rank holds in full.
TEST(DryRun, SevenBillionAtSixteenKOnEightRanks) {
  ModelConfig m = model_preset("7b");
  m.max_position_embeddings = 16384;
  const std::int64_t norms = (2 * m.num_hidden_layers + 1) * m.hidden_size;
  const std::int64_t expected = ((m.num_parameters() - norms) / 8 + norms) * 4;
  // Under the sanitizers TSP only (the 8 virtual ranks of a 7B step are the test's time).
#ifdef ORIGAMI_TESTS_SANITIZED
  const std::vector<const char*> strategies{"tsp"};
#else
  const std::vector<const char*> strategies{"tsp", "tp"};
#endif
  for (const char* strategy : strategies) {
    DryRunOptions o;
    o.seq = 16384;
    const DryRunReport r =
        dry_run(m, make_parallel_config(strategy, 8, "", false, TokenLayoutKind::Zigzag), o);
    ASSERT_EQ(r.ranks.size(), 8u);
    for (const DryRunRank& k : r.ranks) {
      EXPECT_EQ(peak(k, MemCategory::Parameters), expected) << strategy;
      EXPECT_EQ(peak(k, MemCategory::Gradients), expected) << strategy;
      EXPECT_EQ(peak(k, MemCategory::OptimizerState), 2 * expected) << strategy;
      // Every rank computes its share of the model FLOPs (at least 6·P·T / 8).
      EXPECT_GT(k.flops, 6.0 * static_cast<double>(m.num_parameters()) * 16384 / 8 * 0.95)
          << strategy;
    }
    EXPECT_GT(r.step_s, 0);
  }
}

// The virtual clocks depend on the schedule only, not on how the threads were scheduled.
TEST(DryRun, VirtualTimeIsDeterministic) {
  const ModelConfig m = small_model();
  for (const Layout& l :
       {small_layouts()[2], small_layouts()[7], small_layouts()[8]}) {  // tp2, tsp4, dp2xtsp2
    DryRunOptions o;
    o.seq = 32;
    o.batch = 2;
    o.flop_rate = 1e9;  // compute and communication of similar size: overlap matters
    const DryRunReport a = dry_run(m, l.plan, o), b = dry_run(m, l.plan, o);
    for (std::size_t r = 0; r < a.ranks.size(); ++r) {
      EXPECT_EQ(a.ranks[r].clock_s, b.ranks[r].clock_s) << l.name << " rank " << r;
      EXPECT_EQ(a.ranks[r].step_s, b.ranks[r].step_s) << l.name << " rank " << r;
    }
  }
}

TEST(DryRun, AMemoryCapNamesTheCategoryThatDoesNotFit) {
  ModelConfig m = model_preset("7b");
  DryRunOptions o;
  o.seq = 4096;
  o.memory_cap = std::int64_t{2} << 30;  // 2 GiB: not even a rank's 3.1 GiB of parameters
  try {
    dry_run(m, make_parallel_config("tp", 8, "", false, TokenLayoutKind::Zigzag), o);
    FAIL() << "a 2 GiB cap held a 7B model on 8 ranks";
  } catch (const OutOfBudget& e) {
    EXPECT_NE(std::string(e.what()).find("parameters"), std::string::npos) << e.what();
  }
}

TEST(DryRun, RefusesWhatCannotRun) {
  const ModelConfig m = small_model();
  DryRunOptions o;
  o.seq = 32;
  o.flop_rate = 0;
  EXPECT_THROW(dry_run(m, small_layouts()[0].plan, o), ConfigError);
  o.flop_rate = 1e12;
  o.recompute = "some";
  EXPECT_THROW(dry_run(m, small_layouts()[0].plan, o), ConfigError);
  o.recompute = "none";
  o.execute = true;
  o.precision = Precision::bf16();
  EXPECT_THROW(dry_run(m, small_layouts()[0].plan, o), ConfigError);
  o.execute = false;
  o.precision = Precision::fp32();
  o.seq = 33;  // does not split over sp 2 zigzag (2·2 chunks)
  EXPECT_THROW(dry_run(m, small_layouts()[4].plan, o), ConfigError);
}

}  // namespace
}  // namespace origami
