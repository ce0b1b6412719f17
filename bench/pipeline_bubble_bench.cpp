// The pipeline bubble measured beside its formula (issue 20 item 3; parallel/pipeline_schedule.h
// states it): for each (p, m, v) a real training step over p in-process pipeline ranks
// (threads transport, the link model on, one kernel thread per rank), each rank's time
// waiting for its neighbours (RankModel::pipeline_wait_seconds: its receives and the closing
// pp barrier) over its time in the pipeline, against (p - 1) / (v m + p - 1) of the step,
// and the same as idle over busy against (p - 1) / (v m). 1F1B is v = 1, interleaved 1F1B
// v > 1. The model's layers split evenly into the p x v chunks (the embedding and the small
// LM head ride on the end chunks), so that chunk times are equal, as the formula assumes.
// A plain main(): multi-rank steps do not fit Google Benchmark's loop.
//
//   pipeline_bubble_bench                     (p:m:v cases 2:4:1,2:4:2,2:8:1,2:8:2, seq 1024)
//   pipeline_bubble_bench --cases 2:4:1,2:4:2,4:4:1,4:4:2 --rounds 5 --seq 256
//
// Each round runs every case once (interleaved, so that a change in the shared machine's load
// falls on all of them); the figure is the median over rounds of the ranks' mean. Ranks beyond
// the machine's cores share them: a rank that waits frees its core (OpenMP waits passive),
// but while more ranks compute than there are cores each runs slower, which shrinks the
// measured bubble below the formula; say the cores beside the figures. On a loaded machine a
// rank woken from a wait runs a scheduler slice late, a fixed cost per wait that raises the
// measured bubble above the formula when passes are short (docs/strategies.md has both).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "passive_omp.h"
#include "strategy_step.h"

using namespace origami;
using namespace origami::bench;

namespace {

struct BubbleCase {
  int p = 2, m = 4, v = 1;
};

std::vector<BubbleCase> parse_cases(const std::string& text) {
  std::vector<BubbleCase> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    BubbleCase c;
    if (std::sscanf(item.c_str(), "%d:%d:%d", &c.p, &c.m, &c.v) != 3 || c.p < 2 || c.m < 1 ||
        c.v < 1)
      throw ConfigError(fmt::format("--cases item '{}' is not p:m:v with p >= 2, m >= 1, v >= 1 "
                                    "(e.g. --cases 2:4:1,2:4:2)",
                                    item));
    out.push_back(c);
    pos = comma + 1;
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Measured {
  double idle_of_step = 0, idle_of_busy = 0;  // the ranks' mean
  std::vector<double> rank_idle;              // each rank's, of the step
};

Measured measure(const ModelConfig& model, const BubbleCase& c, const StepOptions& base) {
  StrategyCase sc{"pp", {}};
  sc.plan.pp = c.p;
  sc.plan.pp_virtual = c.v;
  StepOptions o = base;
  o.micro_batches = c.m;
  o.threads = c.p;  // one kernel thread per rank
  const StepRun run = run_step(model, sc, o);
  if (!run.ok) throw ConfigError(run.error);
  Measured out;
  for (const RankFigures& r : run.ranks) {
    const double idle = r.pipeline_wait_s / r.pipeline_s;
    out.rank_idle.push_back(idle);
    out.idle_of_step += idle / static_cast<double>(c.p);
    out.idle_of_busy += r.pipeline_wait_s / (r.pipeline_s - r.pipeline_wait_s) / c.p;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  rerun_with_passive_omp_waits(argv);
  std::string cases_text = "2:4:1,2:4:2,2:8:1,2:8:2";
  int rounds = 2;
  StepOptions so;
  so.seq = 1024;
  so.warmup = 1;
  so.steps = 2;
  ModelConfig model;
  model.hidden_size = 256;
  model.intermediate_size = 768;
  model.num_attention_heads = 4;
  model.num_key_value_heads = 2;
  model.vocab_size = 256;
  model.num_hidden_layers = 8;
  model.max_position_embeddings = 4096;
  so.link.enabled = true;
  CLI::App app{"The pipeline bubble, measured, beside (p-1)/(v m + p - 1) (link model on)"};
  app.add_option("--cases", cases_text, "p:m:v (stages, micro-batches, chunks a rank), by commas");
  app.add_option("--rounds", rounds, "rounds of every case; the median is printed");
  app.add_option("--steps", so.steps, "measured steps per run (after --warmup)");
  app.add_option("--warmup", so.warmup, "steps before the measured ones");
  app.add_option("--seq", so.seq, "tokens per micro-batch (one sequence)");
  app.add_option("--hidden", model.hidden_size);
  app.add_option("--intermediate", model.intermediate_size);
  app.add_option("--layers", model.num_hidden_layers,
                 "a multiple of every p x v, so that the chunks are equal");
  app.add_option("--vocab", model.vocab_size);
  CLI11_PARSE(app, argc, argv);
  try {
    const std::vector<BubbleCase> cases = parse_cases(cases_text);
    for (const BubbleCase& c : cases)
      if (model.num_hidden_layers % (c.p * c.v) != 0)
        throw ConfigError(fmt::format("--layers {} does not split evenly into {} x {} chunks; "
                                      "use a multiple of {}",
                                      model.num_hidden_layers, c.p, c.v, c.p * c.v));
    std::vector<std::vector<Measured>> runs(cases.size());
    for (int r = 0; r < rounds; ++r)
      for (std::size_t i = 0; i < cases.size(); ++i) runs[i].push_back(measure(model, cases[i], so));
    fmt::print("pipeline bubble: {} layers, hidden {}, seq {}, vocab {}; {} rounds x {} steps, "
               "link model on ({}); medians over rounds of the ranks' mean\n",
               model.num_hidden_layers, model.hidden_size, so.seq, model.vocab_size, rounds,
               so.steps, so.link.describe());
    fmt::print("{:>3} {:>3} {:>3}  {:>10} {:>10} {:>7}  {:>12} {:>12}  {}\n", "p", "m", "v",
               "idle/step", "formula", "ratio", "idle/busy", "(p-1)/(vm)", "per rank (of step)");
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const BubbleCase& c = cases[i];
      std::vector<double> step, busy;
      std::vector<std::vector<double>> ranks(static_cast<std::size_t>(c.p));
      for (const Measured& m : runs[i]) {
        step.push_back(m.idle_of_step);
        busy.push_back(m.idle_of_busy);
        for (std::size_t k = 0; k < ranks.size(); ++k) ranks[k].push_back(m.rank_idle[k]);
      }
      const double formula = parallel::pipeline_bubble(c.p, c.v, c.m);
      std::string per_rank;
      for (const std::vector<double>& k : ranks) per_rank += fmt::format(" {:.3f}", median(k));
      fmt::print("{:>3} {:>3} {:>3}  {:>10.3f} {:>10.3f} {:>7.2f}  {:>12.3f} {:>12.3f} {}\n", c.p,
                 c.m, c.v, median(step), formula, median(step) / formula, median(busy),
                 parallel::pipeline_bubble_of_busy(c.p, c.v, c.m), per_rank);
    }
  } catch (const ConfigError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }
  return 0;
}
