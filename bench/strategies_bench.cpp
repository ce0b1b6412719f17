// TSP (broadcast-ring and allgather schedules) beside one device, TP, TP-SP, SP and TP+SP
// (2 x D/2) at equal degree D and equal recompute policy, over in-process ranks (threads
// transport). A plain main(): multi-rank steps do not fit Google Benchmark's loop. Two parts:
//
//  sweep    for each strategy, sequence length, recompute policy and precision profile
//           (--precision, --grad-reduce-dtype): warm-up step(s), then measured step(s); one
//           CSV row per (strategy, S, recompute, profile) with the rank-max of
//           every figure: peak bytes per tracker category and in total (and the smallest
//           rank's total), wall and process-CPU seconds, tokens/s and tokens per CPU-second
//           (steadier on a shared machine), bytes sent, communication and exposed seconds;
//           optionally one row per op kind in --comm-csv.
//  longest  under a per-rank cap (--cap), for each strategy and recompute policy, the longest
//           sequence on the --grid for which one real step succeeds while the next grid point
//           throws OutOfBudget. The search starts from the planner's closed-form memory model
//           (plan/cost_model.h; TSP = TP's resident shards + SP's activations + logits / D)
//           and moves by the measured peak, so few real steps are needed.
//
//   strategies_bench --mode sweep --seqs 1024,2048,4096,8192 --recompute none,full
//                    --hidden 256 --layers 4 --heads 8 --kv-heads 4 --intermediate 704
//                    --vocab 8000 --csv sweep.csv --comm-csv comm.csv
//   strategies_bench --mode longest --cap 832MiB --grid 256 --csv longest.csv   (h1024 model)
//
// OpenMP: the program re-executes itself with OMP_WAIT_POLICY=passive unless the variable is
// set (libgomp reads it when it loads, before main): 4 ranks x 1 kernel thread on 2 cores must
// not spin in OpenMP barriers. --threads is the total; each of N ranks gets max(1, threads/N).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "origami/plan/cost_model.h"
#include "passive_omp.h"
#include "strategy_step.h"

using namespace origami;
using namespace origami::bench;

namespace {

struct Options {
  std::string mode = "sweep";
  // (tsp-allgather, TSP's allgather schedule, runs when named in --strategies.)
  std::vector<std::string> strategies = {"single", "tp", "tpsp", "sp", "tpxsp", "tsp"};
  std::vector<std::int64_t> seqs = {1024, 2048, 4096};
  std::vector<std::string> recompute = {"none", "full"};
  std::vector<std::string> precisions = {"fp32"};   // sweep: training's --precision, each
  std::vector<std::string> grad_reduce = {"fp32"};  // sweep: --grad-reduce-dtype, each
  int degree = 4, threads = 2, warmup = 1, steps = 1;
  std::int64_t batch = 1;
  ModelConfig model;
  std::string cap_text;
  std::int64_t grid = 256, max_seq = 65536;
  double seed_fraction = 0.8;
  bool link = false;
  double alpha = 5e-6, beta = 10e9;
  std::string csv, comm_csv;
};

// "832MiB", "1.5GiB", "900MB" or plain bytes.
std::int64_t parse_bytes(const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw ConfigError(fmt::format("--cap '{}' is not a size (e.g. 832MiB, 1GiB, 900000000)", text));
  }
  const std::string unit = text.substr(used);
  double scale = 1;
  if (unit == "KiB")
    scale = 1024.0;
  else if (unit == "MiB")
    scale = 1024.0 * 1024;
  else if (unit == "GiB")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "KB")
    scale = 1e3;
  else if (unit == "MB")
    scale = 1e6;
  else if (unit == "GB")
    scale = 1e9;
  else if (!unit.empty() && unit != "B")
    throw ConfigError(
        fmt::format("--cap '{}': unknown unit '{}' (B, KiB, MiB, GiB, KB, MB, GB)", text, unit));
  if (v <= 0) throw ConfigError(fmt::format("--cap '{}' must be positive", text));
  return static_cast<std::int64_t>(v * scale);
}

std::string category_column(int c) {
  std::string s(mem_category_name(static_cast<MemCategory>(c)));
  std::replace(s.begin(), s.end(), ' ', '_');
  return s;
}

std::string mesh_word(const StrategyCase& sc) {
  return fmt::format("dp{}_tp{}_sp{}{}{}{}", sc.plan.dp, sc.plan.tp, sc.plan.sp,
                     sc.plan.sequence_parallel ? "_regions" : "", sc.plan.is_tsp() ? "_tsp" : "",
                     sc.plan.tsp_schedule == parallel::TspSchedule::Allgather ? "_allgather" : "");
}

std::string csv_text(std::string s) {  // messages in one CSV cell
  std::replace(s.begin(), s.end(), ',', ';');
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '"', '\'');
  return "\"" + s + "\"";
}

std::ofstream open_csv(const std::string& path, const std::string& header) {
  std::ofstream f(path);
  if (!f) throw ConfigError(fmt::format("cannot write {}", path));
  f << header << "\n";
  return f;
}

// ---- sweep

void sweep(const Options& o) {
  std::string header =
      "strategy,mesh,seq,batch,recompute,ranks,threads_per_rank,status,tokens,step_s,"
      "tokens_per_s,cpu_s,tokens_per_cpu_s,peak_total_max,peak_total_min";
  for (int c = 0; c < kNumMemCategories; ++c) header += "," + category_column(c);
  header += ",bytes_sent,comm_s,exposed_s,loss,precision,grad_reduce_dtype";
  std::ofstream out = open_csv(o.csv, header);
  std::ofstream comm_out;
  if (!o.comm_csv.empty())
    comm_out = open_csv(o.comm_csv,
                        "strategy,seq,recompute,kind,calls,bytes_sent,bytes_received,time_s,"
                        "exposed_s");
  // Each --precision with each --grad-reduce-dtype: bf16 gradients belong to the bf16 profile
  // only, so the fp32 profile runs once, with fp32 gradients.
  std::vector<std::pair<std::string, std::string>> profiles;
  for (const std::string& p : o.precisions)
    for (const std::string& g : o.grad_reduce)
      if (p != "fp32" || g == "fp32") profiles.emplace_back(p, g);
  for (const auto& [precision, grad_reduce] : profiles)
    for (const std::string& rc_name : o.recompute)
      for (std::int64_t seq : o.seqs)
        for (const std::string& name : o.strategies) {
          const StrategyCase sc = strategy_case(name, o.degree);
          StepOptions so;
          so.seq = seq;
          so.batch = o.batch;
          so.recompute = parse_recompute(rc_name);
          so.warmup = o.warmup;
          so.steps = o.steps;
          so.threads = o.threads;
          so.link.enabled = o.link;
          so.link.intra_alpha_s = so.link.inter_alpha_s = o.alpha;
          so.link.intra_beta_Bps = so.link.inter_beta_Bps = o.beta;
          so.precision = Precision::parse(precision, grad_reduce);
          const int ranks = sc.plan.world();
          std::string status = "ok";
          StepRun run;
          try {
            run = run_step(o.model, sc, so);
            if (!run.ok) status = csv_text(run.error);
          } catch (const ConfigError& e) {
            status = csv_text(std::string("refused: ") + e.what());
          }
          const RankMax mx = rank_max(run);
          const double tokens = static_cast<double>(o.batch * seq * o.steps);
          out << fmt::format(
              "{},{},{},{},{},{},{},{},{},{:.4f},{:.1f},{:.4f},{:.1f},{},{}", name, mesh_word(sc),
              seq, o.batch, rc_name, ranks, std::max(1, o.threads / ranks), status,
              static_cast<std::int64_t>(tokens), run.wall_s,
              run.wall_s > 0 ? tokens / run.wall_s : 0.0, run.cpu_s,
              run.cpu_s > 0 ? tokens / run.cpu_s : 0.0, mx.peak_total, mx.peak_total_min);
          for (std::int64_t b : mx.peak) out << "," << b;
          out << fmt::format(",{},{:.4f},{:.4f},{:.6f},{},{}\n", mx.total.bytes_sent,
                             mx.total.time_s, mx.total.exposed_s, run.loss, precision, grad_reduce);
          out.flush();
          if (comm_out.is_open())
            for (const auto& [kind, op] : mx.ops)
              comm_out << fmt::format("{},{},{},{},{},{},{},{:.4f},{:.4f}\n", name, seq, rc_name,
                                      kind, op.calls, op.bytes_sent, op.bytes_received, op.time_s,
                                      op.exposed_s);
          std::fprintf(
              stderr, "%-6s %s/%s S=%-6lld %-4s %s  peak %s  %.1f tok/s  %.1f tok/CPU-s  sent %s\n",
              name.c_str(), precision.c_str(), grad_reduce.c_str(), static_cast<long long>(seq),
              rc_name.c_str(), status == "ok" ? "ok" : status.c_str(),
              format_bytes(mx.peak_total).c_str(), run.wall_s > 0 ? tokens / run.wall_s : 0.0,
              run.cpu_s > 0 ? tokens / run.cpu_s : 0.0, format_bytes(mx.total.bytes_sent).c_str());
        }
}

// ---- longest trainable sequence under the cap

// The closed-form per-rank bytes of a strategy at `seq` (the search's seed only: the model
// leaves out communication buffers and workspace, hence --seed-fraction).
std::int64_t estimate_bytes(const ModelConfig& m, const StrategyCase& sc, std::int64_t seq,
                            std::int64_t batch, Recompute rc) {
  plan::Workload w;
  w.batch = batch / sc.plan.dp;  // each replica's micro-batch (`batch` is the job's)
  w.seq = seq;
  w.recompute = rc == Recompute::None  ? plan::Recompute::None
                : rc == Recompute::Mlp ? plan::Recompute::Mlp
                                       : plan::Recompute::Full;
  return plan::memory_per_device(m, sc.plan, w).total();
}

struct Probe {
  std::int64_t seq;
  StepRun run;
};

void longest(const Options& o) {
  if (o.cap_text.empty()) throw ConfigError("--mode longest needs --cap (e.g. --cap 832MiB)");
  const std::int64_t cap = parse_bytes(o.cap_text);
  if (o.grid % (2 * o.degree) != 0)
    throw ConfigError(fmt::format("--grid {} must be a multiple of 2 x degree = {} (zigzag)",
                                  o.grid, 2 * o.degree));
  std::string header =
      "strategy,mesh,recompute,cap_bytes,grid,seed_seq,longest_seq,first_failing_seq,probes,"
      "real_steps_s,peak_total_at_longest";
  for (int c = 0; c < kNumMemCategories; ++c) header += "," + category_column(c);
  header += ",failure";
  std::ofstream out = open_csv(o.csv, header);
  for (const std::string& rc_name : o.recompute)
    for (const std::string& name : o.strategies) {
      const StrategyCase sc = strategy_case(name, o.degree);
      const Recompute rc = parse_recompute(rc_name);
      auto estimate = [&](std::int64_t s) { return estimate_bytes(o.model, sc, s, o.batch, rc); };
      // Largest grid point where the model's sequence-dependent bytes stay under fraction x
      // (cap - resident bytes); the resident part is the model's value extrapolated to S = 0.
      const double resident = static_cast<double>(2 * estimate(o.grid) - estimate(2 * o.grid));
      const double budget = resident + o.seed_fraction * (static_cast<double>(cap) - resident);
      std::int64_t seed = o.grid;
      for (std::int64_t s = o.grid; s <= o.max_seq; s += o.grid)
        if (static_cast<double>(estimate(s)) <= budget) seed = s;
      std::int64_t lo = 0, hi = 0;  // largest success, smallest failure (0: none yet)
      StepRun at_lo;
      std::string failure;
      std::vector<Probe> probes;
      double seconds = 0;
      std::int64_t s = seed;
      int down = 0;  // consecutive failures without a success below them
      while (true) {
        StepOptions so;
        so.seq = s;
        so.batch = o.batch;
        so.recompute = rc;
        so.warmup = 0;
        so.steps = 1;
        so.threads = o.threads;
        so.cap = cap;
        const auto t0 = std::chrono::steady_clock::now();
        StepRun run = run_step(o.model, sc, so);
        const double dt =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        seconds += dt;
        std::fprintf(stderr, "%-6s %-4s S=%-6lld %s (%.0f s)%s%s\n", name.c_str(), rc_name.c_str(),
                     static_cast<long long>(s), run.ok ? "fits" : "over the cap", dt,
                     run.ok ? "" : ": ", run.ok ? "" : run.error.c_str());
        probes.push_back({s, run});
        if (run.ok) {
          lo = s;
          down = 0;
          const std::int64_t peak = rank_max(run).peak_total;
          at_lo = std::move(run);
          if (hi != 0 && hi - lo <= o.grid) break;
          if (hi != 0) {
            s = lo + (hi - lo) / o.grid / 2 * o.grid;
          } else {
            // Up by what the model says the remaining bytes buy, at least one grid step.
            std::int64_t next = lo + o.grid;
            for (std::int64_t t = lo + o.grid; t <= o.max_seq; t += o.grid)
              if (peak + estimate(t) - estimate(lo) <= cap) next = t;
            if (next > o.max_seq) break;
            s = next;
          }
        } else {
          hi = s;
          failure = run.error;
          if (hi - lo <= o.grid) break;
          if (lo != 0) {
            s = lo + (hi - lo) / o.grid / 2 * o.grid;
          } else {
            s = std::max<std::int64_t>(o.grid, hi - o.grid * (std::int64_t{1} << down));
            ++down;
            if (s == hi) break;  // the smallest grid point fails: nothing fits
          }
        }
      }
      const RankMax mx = rank_max(at_lo);
      out << fmt::format("{},{},{},{},{},{},{},{},{},{:.1f},{}", name, mesh_word(sc), rc_name, cap,
                         o.grid, seed, lo, hi, probes.size(), seconds, mx.peak_total);
      for (std::int64_t b : mx.peak) out << "," << b;
      out << "," << csv_text(failure) << "\n";
      out.flush();
      std::fprintf(stderr, "%-6s %-4s longest %lld (next %lld fails), %zu probes, %.0f s\n",
                   name.c_str(), rc_name.c_str(), static_cast<long long>(lo),
                   static_cast<long long>(hi), probes.size(), seconds);
    }
}

}  // namespace

int main(int argc, char** argv) {
  origami::bench::rerun_with_passive_omp_waits(argv);
  Options o;
  o.model.hidden_size = 1024;
  o.model.num_hidden_layers = 8;
  o.model.num_attention_heads = 16;
  o.model.num_key_value_heads = 8;
  o.model.intermediate_size = 2816;
  o.model.vocab_size = 32000;
  CLI::App app{"TSP beside single, TP, TP-SP, SP and TP+SP: memory, speed, communication"};
  app.add_option("--mode", o.mode, "sweep | longest")->check(CLI::IsMember({"sweep", "longest"}));
  app.add_option("--strategies", o.strategies, "single,tp,tpsp,sp,tpxsp,tsp,tsp-allgather")
      ->delimiter(',');
  app.add_option("--seqs", o.seqs, "sweep: sequence lengths")->delimiter(',');
  app.add_option("--recompute", o.recompute, "none,mlp,full")->delimiter(',');
  app.add_option("--precision", o.precisions, "sweep: fp32,bf16 (training's precision, each)")
      ->delimiter(',');
  app.add_option("--grad-reduce-dtype", o.grad_reduce,
                 "sweep: fp32,bf16 (training's --grad-reduce-dtype, each; bf16 gradients run "
                 "under --precision bf16 only)")
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--degree", o.degree, "ranks of every parallel strategy");
  app.add_option("--threads", o.threads, "kernel threads in all (per rank: threads / ranks)");
  app.add_option("--warmup", o.warmup, "sweep: steps before the measured ones");
  app.add_option("--steps", o.steps, "sweep: measured steps");
  app.add_option("--batch", o.batch, "sequences per step");
  app.add_option("--hidden", o.model.hidden_size);
  app.add_option("--layers", o.model.num_hidden_layers);
  app.add_option("--heads", o.model.num_attention_heads);
  app.add_option("--kv-heads", o.model.num_key_value_heads);
  app.add_option("--intermediate", o.model.intermediate_size);
  app.add_option("--vocab", o.model.vocab_size);
  app.add_option("--cap", o.cap_text, "longest: per-rank memory cap (e.g. 832MiB)");
  app.add_option("--grid", o.grid, "longest: sequence grid (multiple of 2 x degree)");
  app.add_option("--max-seq", o.max_seq, "longest: largest sequence tried");
  app.add_option("--seed-fraction", o.seed_fraction,
                 "longest: first probe where the closed-form model's sequence-dependent bytes "
                 "reach this share of what the cap leaves after the resident weights");
  app.add_flag("--link", o.link, "sweep: link model on (alpha, beta)");
  app.add_option("--alpha", o.alpha, "link latency, s");
  app.add_option("--beta", o.beta, "link bandwidth, bytes/s");
  app.add_option("--csv", o.csv, "output CSV")->required();
  app.add_option("--comm-csv", o.comm_csv, "sweep: per-op-kind CSV");
  CLI11_PARSE(app, argc, argv);
  try {
    std::int64_t longest_seq = o.mode == "sweep" ? 0 : o.max_seq;
    for (std::int64_t s : o.seqs) longest_seq = std::max(longest_seq, s);
    o.model.max_position_embeddings = std::max(o.model.max_position_embeddings, longest_seq);
    validate(o.model);
    if (o.mode == "sweep")
      sweep(o);
    else
      longest(o);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
