// The planner's step time (plan::predict, docs/planner.md "FLOPs and step time") and the dry
// run's virtual step (dryrun/training.h) beside the WALL CLOCK of real steps over in-process
// ranks, the threads transport's link model on (issue 6 item 5). A plain main(): multi-rank
// steps do not fit Google Benchmark's loop. One rank per core, one kernel thread per rank.
//
//  1. calibration: the single-device step's wall time (link off, the median over the timed
//     steps of its rounds) and the planner's executed FLOPs for it give the rate, rate =
//     FLOPs / time, the effective FLOP/s of a whole step on one core (GEMMs, attention, norms,
//     the optimizer...); the same per CPU second; the oneDNN GEMM rate of one thread on two of
//     the model's shapes is printed beside them (kernel efficiency), per wall and CPU second.
//     A plan::Hardware gets that rate, achievable 1, the link's alpha and beta on both link
//     classes and devices_per_node = the degree; the dry run gets the same rate and link.
//  2. for each row (layout, recompute policy), --rounds rounds of a link-OFF run then a
//     link-ON run, each warm-up step(s) then --steps steps timed one by one between barriers
//     (interleaved: a change in the shared machine's load falls on both modes); the medians
//     over all timed steps against
//       predicted compute       / measured link-off step
//       predicted exposed comm  / measured (link-on - link-off)
//       predicted step          / measured link-on step,  and the dry run's step / measured
//     plus the time the ranks sat in wait() per step (communicator stats, link on and off),
//     and each rank's CPU time per step against the compute predicted at the rate calibrated
//     on the single step's CPU time (waits are passive: CPU time is the work a rank did, an
//     estimate of its step on a core of its own, whatever else runs on the machine).
//
//   plan_wallclock_bench --seq 2048 --alpha 30e-6 --beta 0.2e9 --csv wallclock.csv
//   plan_wallclock_bench --quick --csv smoke.csv        (tiny model: a smoke test, seconds)
//
// Layout words: single, dp, tp, tpsp, sp, tsp, pp (--degree stages) at --degree ranks (dp: one
// sequence per rank, so its global batch is the degree); ":full" or ":mlp" after a word sets its
// recompute policy (none otherwise). OpenMP: the program re-executes itself with
// OMP_WAIT_POLICY=passive unless the variable is set (a rank waiting for its peer must not spin on
// the other's core).
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "origami/dryrun/training.h"
#include "origami/kernels/gemm.h"
#include "origami/parallel/registry.h"
#include "origami/plan/predict.h"
#include "passive_omp.h"
#include "strategy_step.h"

using namespace origami;
using namespace origami::bench;

namespace {

struct Options {
  std::vector<std::string> rows = {"single", "dp",       "tp",       "tpsp",      "sp",
                                   "tsp",    "tp:full",  "tsp:full", "single:full"};
  int degree = 2, warmup = 1, steps = 2, rounds = 2;
  int grad_accum = 1;  // micro-batches per step (a pipeline's m)
  std::int64_t seq = 2048;
  ModelConfig model;
  // A slow link, so that communication is a sizeable part of the step (TP: about a third).
  double alpha = 30e-6, beta = 0.2e9;
  bool quick = false;
  std::string csv;
};

struct Row {
  std::string word, strategy, recompute;
  StrategyCase sc;
  plan::Layout layout;
  std::int64_t batch = 1;
};

Row parse_row(const std::string& word, int degree) {
  Row r;
  r.word = word;
  const auto colon = word.find(':');
  r.strategy = word.substr(0, colon);
  r.recompute = colon == std::string::npos ? "none" : word.substr(colon + 1);
  plan::parse_recompute(r.recompute);  // refuses an unknown policy, naming the choices
  if (r.strategy == "tpxsp")
    throw ConfigError(
        "tpxsp needs 4 ranks (2 x 2); this benchmark runs one rank per core: "
        "use single, dp, tp, tpsp, sp, tsp or pp");
  // pp: --degree pipeline stages of one rank each (1F1B over --grad-accum micro-batches).
  r.sc = r.strategy == "pp" ? StrategyCase{"pp", parallel::make_parallel_config(
                                                     "dp", 1, fmt::format("pp={}", degree), false,
                                                     parallel::TokenLayoutKind::Zigzag)}
                            : strategy_case(r.strategy, degree);
  const parallel::ParallelConfig& p = r.sc.plan;
  r.layout = p;
  r.batch = p.dp;  // one sequence per data-parallel rank
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The oneDNN GEMM rate (FLOP/s) of one kernel thread on C[M,N] = A[M,K] @ B[N,K]^T, the
// forward of a linear layer, median of 9 products after one untimed: per wall second and per
// CPU second of the calling thread (one kernel thread runs on the caller), the latter
// unaffected by other processes taking the core.
struct GemmRate {
  double wall = 0, cpu = 0;
};
GemmRate gemm_rate(std::int64_t M, std::int64_t N, std::int64_t K) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> A(static_cast<std::size_t>(M * K)), B(static_cast<std::size_t>(N * K)),
      C(static_cast<std::size_t>(M * N));
  for (float& x : A) x = dist(rng);
  for (float& x : B) x = dist(rng);
  kernels::set_thread_count(1);
  std::vector<double> wall, cpu;
  for (int i = 0; i < 10; ++i) {
    const double c0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    kernels::gemm(kernels::Trans::N, kernels::Trans::T, M, N, K, 1.0f, A.data(), K, B.data(), K,
                  0.0f, C.data(), N);
    if (i == 0) continue;
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(thread_cpu_seconds() - c0);
  }
  const double flops = kernels::gemm_flops(M, N, K);
  return {flops / median(wall), flops / median(cpu)};
}

// One mode (link off or on) of a row over every round: medians and means per step.
struct Measured {
  double step_s = 0;    // median wall time of a step
  double waited_s = 0;  // per step, the slowest rank's seconds blocked in wait()
  double cpu_s = 0;     // process CPU seconds per step per rank (busy, not waiting: passive)
  std::vector<double> steps;
  double loss = 0;
};

StepRun one_run(const Options& o, const Row& r, bool link_on) {
  StepOptions so;
  so.seq = o.seq;
  so.batch = r.batch;
  so.recompute = parse_recompute(r.recompute);
  so.warmup = o.warmup;
  so.steps = o.steps;
  so.micro_batches = o.grad_accum;
  so.threads = r.sc.plan.world();  // one kernel thread per rank
  so.time_each = true;
  so.link.enabled = link_on;
  so.link.intra_alpha_s = so.link.inter_alpha_s = o.alpha;
  so.link.intra_beta_Bps = so.link.inter_beta_Bps = o.beta;
  so.link.devices_per_node = o.degree;
  StepRun run = run_step(o.model, r.sc, so);
  if (!run.ok) throw ConfigError(fmt::format("{}: {}", r.word, run.error));
  return run;
}

// --rounds rounds of (link off, link on), interleaved so that a change in the machine's load
// (other processes on the shared cores) falls on both modes alike.
std::pair<Measured, Measured> measure(const Options& o, const Row& r) {
  Measured mode[2];
  for (int round = 0; round < o.rounds; ++round)
    for (int on = 0; on < 2; ++on) {
      const StepRun run = one_run(o, r, on == 1);
      Measured& m = mode[on];
      m.steps.insert(m.steps.end(), run.step_wall_s.begin(), run.step_wall_s.end());
      m.waited_s += rank_max(run).total.exposed_s;
      m.cpu_s += run.cpu_s / r.sc.plan.world();
      m.loss = run.loss;
    }
  for (Measured& m : mode) {
    m.step_s = median(m.steps);
    m.waited_s /= double(m.steps.size());
    m.cpu_s /= double(m.steps.size());
  }
  return {mode[0], mode[1]};
}

plan::Hardware hardware(const Options& o, double rate) {
  plan::Hardware hw;
  hw.name = "wallclock";
  hw.description = "this CPU, one core per rank, rate calibrated on the single-device step";
  hw.memory_bytes = std::int64_t{1} << 50;  // fit is not the question here
  hw.peak_flops_fp32 = hw.peak_flops_bf16 = rate;
  hw.achievable = 1;
  hw.intra = {o.alpha, o.beta};
  hw.inter = {o.alpha, o.beta};
  hw.devices_per_node = o.degree;
  return hw;
}

plan::Prediction prediction(const Options& o, const Row& r, const plan::Hardware& hw) {
  plan::Workload w;
  w.batch = r.batch / r.layout.dp;  // each replica's micro-batch (r.batch is the job's)
  w.seq = o.seq;
  w.grad_accum = o.grad_accum;
  w.recompute = plan::parse_recompute(r.recompute);
  return plan::predict(o.model, r.layout, w, hw);
}

// The dry run's virtual step and per-rank compute (the slowest rank's) at the rate and link.
std::pair<double, double> dry_step(const Options& o, const Row& r, double rate) {
  DryRunOptions d;
  d.seq = o.seq;
  d.batch = r.batch / r.sc.plan.dp;  // each replica's micro-batch
  d.recompute = r.recompute;
  d.grad_accum = o.grad_accum;
  d.flop_rate = rate;
  d.link.intra_alpha_s = d.link.inter_alpha_s = o.alpha;
  d.link.intra_beta_Bps = d.link.inter_beta_Bps = o.beta;
  d.link.devices_per_node = o.degree;
  const DryRunReport rep = dry_run(o.model, r.sc.plan, d);
  double compute = 0;
  for (const DryRunRank& k : rep.ranks) compute = std::max(compute, k.compute_s);
  return {rep.step_s, compute};
}

// /proc/loadavg's 1, 5 and 15 minute figures: how busy the shared machine was.
std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::string ratio(double a, double b) { return b > 0 ? fmt::format("{:.2f}", a / b) : "-"; }

int run(const Options& o) {
  std::vector<Row> rows;
  for (const std::string& w : o.rows) rows.push_back(parse_row(w, o.degree));
  for (const Row& r : rows)
    parallel::validate_plan(r.sc.plan, o.model, o.seq, r.batch / r.sc.plan.dp,
                            r.sc.plan.world());
  const std::int64_t S = o.seq, h = o.model.hidden_size;
  std::printf("model h %lld, %lld layers, %lld heads (%lld kv), f %lld, V %lld; S %lld; "
              "%d ranks x 1 kernel thread; %d rounds of (link off, link on) runs of %d warm-up + %d "
              "timed steps, median over the timed steps\n",
              static_cast<long long>(h), static_cast<long long>(o.model.num_hidden_layers),
              static_cast<long long>(o.model.num_attention_heads),
              static_cast<long long>(o.model.num_key_value_heads),
              static_cast<long long>(o.model.intermediate_size),
              static_cast<long long>(o.model.vocab_size), static_cast<long long>(S), o.degree,
              o.rounds, o.warmup, o.steps);
  std::printf("link model (on): alpha %.3g s, beta %.3g B/s on every hop; load average %s\n",
              o.alpha, o.beta, load_average().c_str());

  // 1. Calibration.
  const GemmRate mlp_rate = gemm_rate(S, o.model.intermediate_size, h);
  const GemmRate head_rate = gemm_rate(S, o.model.vocab_size, h);
  const Row single = parse_row("single", o.degree);
  const std::pair<Measured, Measured> one = measure(o, single);
  const double flops = prediction(o, single, hardware(o, 1.0)).executed_flops_per_device;
  const double rate = flops / one.first.step_s;
  // The same from the rank's CPU time: what the rate would be on a core of its own.
  const double cpu_rate = flops / one.first.cpu_s;
  std::printf("oneDNN GEMM, 1 thread, GFLOP/s per wall / per CPU second: %.1f / %.1f at "
              "[%lld x %lld] @ [%lld x %lld]^T (MLP up), %.1f / %.1f at [%lld x %lld] @ "
              "[%lld x %lld]^T (head)\n",
              mlp_rate.wall / 1e9, mlp_rate.cpu / 1e9, static_cast<long long>(S),
              static_cast<long long>(h), static_cast<long long>(o.model.intermediate_size),
              static_cast<long long>(h), head_rate.wall / 1e9, head_rate.cpu / 1e9,
              static_cast<long long>(S), static_cast<long long>(h),
              static_cast<long long>(o.model.vocab_size), static_cast<long long>(h));
  std::printf("calibration: single-device step %.3f s (median), executed %.2f GFLOP -> rate "
              "%.1f GFLOP/s (%.2f of the MLP GEMM's per wall second); from its CPU time (%.3f s "
              "per step) %.1f GFLOP/s (%.2f of the MLP GEMM's per CPU second)\n\n",
              one.first.step_s, flops / 1e9, rate / 1e9, rate / mlp_rate.wall, one.first.cpu_s,
              cpu_rate / 1e9, cpu_rate / mlp_rate.cpu);
  const plan::Hardware hw = hardware(o, rate);

  std::ofstream csv;
  if (!o.csv.empty()) {
    csv.open(o.csv);
    if (!csv) throw ConfigError(fmt::format("cannot write --csv {}", o.csv));
    csv << "layout,recompute,ranks,batch,seq,alpha_s,beta_Bps,rate_flops,cpu_rate_flops,"
           "gemm_cpu_flops,"
           "pred_compute_s,dry_compute_s,meas_off_s,cpu_off_s,pred_comm_s,pred_exposed_s,"
           "meas_comm_s,pred_step_s,dry_step_s,meas_on_s,cpu_on_s,waited_off_s,waited_on_s,"
           "off_min_s,on_min_s,off_steps,on_steps,loss,load_average\n";
  }
  std::printf("%-12s %7s %7s %7s %5s %7s %5s | %7s %7s %5s %7s | %7s %7s %7s %5s %5s\n",
              "layout", "compute", "dry", "off", "p/m", "cpu", "p/cpu", "exposed", "on-off",
              "p/m", "wait-on", "step", "dry", "on", "p/m", "d/m");
  for (const Row& r : rows) {
    const plan::Prediction p = prediction(o, r, hw);
    const auto [dry_s, dry_compute] = dry_step(o, r, rate);
    const auto [off, on] = r.word == "single" ? one : measure(o, r);
    // Predicted compute at the CPU-time rate against the rank's CPU time: the work split.
    const double cpu_ratio = (p.compute_s * rate / cpu_rate) / off.cpu_s;
    const double comm = on.step_s - off.step_s;
    std::printf(
        "%-12s %7.3f %7.3f %7.3f %5s %7.3f %5s | %7.3f %7.3f %5s %7.3f | %7.3f %7.3f %7.3f %5s "
        "%5s\n",
        r.word.c_str(), p.compute_s, dry_compute, off.step_s,
        ratio(p.compute_s, off.step_s).c_str(), off.cpu_s,
        fmt::format("{:.2f}", cpu_ratio).c_str(),
        p.exposed_comm_s, comm, ratio(p.exposed_comm_s, comm).c_str(), on.waited_s, p.step_s,
        dry_s, on.step_s, ratio(p.step_s, on.step_s).c_str(), ratio(dry_s, on.step_s).c_str());
    std::fflush(stdout);
    if (csv.is_open()) {
      const auto join = [](const std::vector<double>& v) {
        std::string s;
        for (double x : v) s += fmt::format("{}{:.4f}", s.empty() ? "" : ";", x);
        return s;
      };
      csv << fmt::format(
          "{},{},{},{},{},{},{},{:.4g},{:.4g},{:.4g},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},"
          "{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{},{},{:.6f},{}\n",
          r.strategy, r.recompute, r.sc.plan.world(), r.batch, S, o.alpha, o.beta, rate,
          cpu_rate, mlp_rate.cpu, p.compute_s, dry_compute, off.step_s, off.cpu_s, p.comm_s, p.exposed_comm_s,
          comm, p.step_s, dry_s, on.step_s, on.cpu_s, off.waited_s, on.waited_s,
          *std::min_element(off.steps.begin(), off.steps.end()),
          *std::min_element(on.steps.begin(), on.steps.end()), join(off.steps),
          join(on.steps), on.loss, load_average());
      csv.flush();
    }
  }
  std::printf("load average at the end: %s\n", load_average().c_str());
  std::printf(
      "\ncompute: the planner's executed FLOPs per device / rate; dry: the dry run's (kernel "
      "FLOPs charged at the same rate, slowest rank); off/on: measured median step, link model "
      "off/on; cpu: process CPU seconds per step per rank, link off (waits are passive, so "
      "this is the work a rank did, whatever else ran on the cores), p/cpu: the predicted "
      "compute at the rate of the single step's CPU time / cpu; exposed: the planner's "
      "exposed communication; wait-on: seconds per step the slowest rank sat in wait(), link "
      "on; p/m predicted / measured, d/m dry run / measured\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  origami::bench::rerun_with_passive_omp_waits(argv);
  Options o;
  // About 1.2 s of compute per step on one core at S 2048 (79 executed GFLOP, a third of it
  // causal attention), so a run of every row takes a few minutes.
  o.model.hidden_size = 256;
  o.model.num_hidden_layers = 4;
  o.model.num_attention_heads = 4;
  o.model.num_key_value_heads = 2;
  o.model.intermediate_size = 688;
  o.model.vocab_size = 4096;
  CLI::App app{"The planner's and the dry run's step time beside the wall clock (link model)"};
  app.add_option("--rows", o.rows, "layouts, e.g. single,dp,tp,tpsp,sp,tsp,tp:full,tsp:full")
      ->delimiter(',');
  app.add_option("--degree", o.degree, "ranks of every parallel layout (one core each)");
  app.add_option("--seq", o.seq, "tokens per sequence");
  app.add_option("--warmup", o.warmup, "steps before the measured ones");
  app.add_option("--steps", o.steps, "measured steps per run (after --warmup)");
  app.add_option("--grad-accum", o.grad_accum, "micro-batches per step (every row's; pp's m)");
  app.add_option("--rounds", o.rounds,
                 "runs of each mode (link off, link on, interleaved); the median is over "
                 "rounds x steps");
  app.add_option("--hidden", o.model.hidden_size);
  app.add_option("--layers", o.model.num_hidden_layers);
  app.add_option("--heads", o.model.num_attention_heads);
  app.add_option("--kv-heads", o.model.num_key_value_heads);
  app.add_option("--intermediate", o.model.intermediate_size);
  app.add_option("--vocab", o.model.vocab_size);
  app.add_option("--alpha", o.alpha, "link model: latency per message, s");
  app.add_option("--beta", o.beta, "link model: bandwidth, bytes/s");
  app.add_flag("--quick", o.quick,
               "smoke test: a tiny model (h 64, 2 layers, V 96) at S 128, 1 measured step");
  app.add_option("--csv", o.csv, "output CSV (one row per layout)");
  CLI11_PARSE(app, argc, argv);
  if (o.quick) {
    o.model.hidden_size = 64;
    o.model.num_hidden_layers = 2;
    o.model.num_attention_heads = 8;
    o.model.num_key_value_heads = 4;
    o.model.intermediate_size = 128;
    o.model.vocab_size = 96;
    o.seq = 128;
    o.warmup = 1;
    o.steps = 1;
    o.rounds = 1;
  }
  try {
    if (o.degree < 1) throw ConfigError(fmt::format("--degree {} must be >= 1", o.degree));
    if (o.steps < 1) throw ConfigError(fmt::format("--steps {} must be >= 1", o.steps));
    if (o.grad_accum < 1)
      throw ConfigError(fmt::format("--grad-accum {} must be >= 1", o.grad_accum));
    if (o.rounds < 1) throw ConfigError(fmt::format("--rounds {} must be >= 1", o.rounds));
    if (o.alpha < 0 || !(o.beta > 0))
      throw ConfigError(fmt::format("--alpha {} must be >= 0 and --beta {} > 0", o.alpha, o.beta));
    o.model.max_position_embeddings = std::max(o.model.max_position_embeddings, o.seq);
    validate(o.model);
    return run(o);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
