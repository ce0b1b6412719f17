// TSP's two mixture-of-experts schedules side by side (docs/moe.md), with the link model on:
// the weight ring (every expert's shard circulated, bytes independent of S) against the
// expert schedule (E/D whole experts a rank, the tokens' rows by all-to-all, bytes growing
// with S). For each sequence length: one training step after a warm-up step
// (bench/strategy_step.h), its wall time, world rank 0's exposed communication (time blocked
// in wait(), every communicator of the rank) and the bytes it sent, per schedule (the fastest of --repeats runs, the two schedules
// alternating), and which is faster. A plain main(): the
// multi-rank timing does not fit Google Benchmark's loop.
//
//   tsp_moe_bench [--ranks 4] [--hidden 128] [--ffn 64] [--experts 8] [--top-k 2]
//                 [--layers 2] [--batch 1] [--seqs 256,1024,4096] [--alpha 5e-6]
//                 [--beta 1e9] [--threads 1] [--repeats 3]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "strategy_step.h"

using namespace origami;

namespace {

struct Options {
  int ranks = 4, threads = 1, repeats = 3;
  std::int64_t hidden = 128, ffn = 64, experts = 8, top_k = 2, layers = 2, batch = 1;
  std::vector<std::int64_t> seqs = {256, 1024, 4096};
  double alpha = 5e-6, beta = 1e9;
};

struct Measured {
  double step_s = 0, exposed_s = 0;
  std::int64_t bytes_sent = 0;
};

std::vector<std::int64_t> parse_list(const std::string& text) {
  std::vector<std::int64_t> out;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    out.push_back(std::atoll(text.substr(at, comma - at).c_str()));
    at = comma + 1;
  }
  return out;
}

// One measured training step (bench/strategy_step.h, after a warm-up step) of `schedule`.
Measured run(const Options& o, std::int64_t seq, parallel::MoeSchedule schedule) {
  ModelConfig m;
  m.vocab_size = 256;
  m.hidden_size = o.hidden;
  m.intermediate_size = o.ffn;
  m.num_hidden_layers = o.layers;
  m.num_attention_heads = o.hidden / 32;  // heads of 32: D = 4 divides them at h = 128
  m.num_key_value_heads = o.hidden / 32;
  m.max_position_embeddings = seq;
  m.num_local_experts = o.experts;
  m.num_experts_per_tok = o.top_k;
  bench::StrategyCase sc = bench::strategy_case("tsp", o.ranks);
  sc.plan.moe_schedule = schedule;
  bench::StepOptions so;
  so.seq = seq;
  so.batch = o.batch;
  so.threads = o.threads * o.ranks;
  so.link.enabled = true;
  so.link.intra_alpha_s = so.link.inter_alpha_s = o.alpha;
  so.link.intra_beta_Bps = so.link.inter_beta_Bps = o.beta;
  const bench::StepRun r = bench::run_step(m, sc, so);
  Measured out;
  out.step_s = r.wall_s;
  for (const auto& [kind, s] : r.ranks.front().ops) {  // world rank 0
    if (kind == "barrier") continue;  // run_step's own, around the measured step
    out.exposed_s += s.exposed_s;
    out.bytes_sent += s.bytes_sent;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--ranks") o.ranks = std::atoi(v.c_str());
    else if (k == "--hidden") o.hidden = std::atoll(v.c_str());
    else if (k == "--ffn") o.ffn = std::atoll(v.c_str());
    else if (k == "--experts") o.experts = std::atoll(v.c_str());
    else if (k == "--top-k") o.top_k = std::atoll(v.c_str());
    else if (k == "--layers") o.layers = std::atoll(v.c_str());
    else if (k == "--batch") o.batch = std::atoll(v.c_str());
    else if (k == "--seqs") o.seqs = parse_list(v);
    else if (k == "--alpha") o.alpha = std::atof(v.c_str());
    else if (k == "--beta") o.beta = std::atof(v.c_str());
    else if (k == "--threads") o.threads = std::atoi(v.c_str());
    else if (k == "--repeats") o.repeats = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  std::printf("TSP mixture of experts, D=%d h=%lld f=%lld E=%lld top-%lld L=%lld B=%lld, link "
              "alpha %.1e s beta %.2e B/s; one training step, rank 0's communication\n",
              o.ranks, static_cast<long long>(o.hidden), static_cast<long long>(o.ffn),
              static_cast<long long>(o.experts), static_cast<long long>(o.top_k),
              static_cast<long long>(o.layers), static_cast<long long>(o.batch), o.alpha,
              o.beta);
  std::printf("%6s | %9s %10s %9s | %9s %10s %9s | %s\n", "S", "ring s", "exposed s", "MB sent",
              "expert s", "exposed s", "MB sent", "faster");
  for (const std::int64_t seq : o.seqs) {
    Measured ring, expert;
    for (int r = 0; r < o.repeats; ++r) {
      const Measured a = run(o, seq, parallel::MoeSchedule::Ring);
      const Measured b = run(o, seq, parallel::MoeSchedule::Expert);
      if (r == 0 || a.step_s < ring.step_s) ring = a;
      if (r == 0 || b.step_s < expert.step_s) expert = b;
    }
    std::printf("%6lld | %9.4f %10.4f %9.2f | %9.4f %10.4f %9.2f | %s (%.2fx)\n",
                static_cast<long long>(seq), ring.step_s, ring.exposed_s, ring.bytes_sent / 1e6,
                expert.step_s, expert.exposed_s, expert.bytes_sent / 1e6,
                expert.step_s < ring.step_s ? "expert" : "ring",
                expert.step_s < ring.step_s ? ring.step_s / expert.step_s
                                            : expert.step_s / ring.step_s);
  }
  return 0;
}
