// Inference figures (docs/inference.md). A plain main(): multi-rank runs with wall-clock
// decode timing do not fit Google Benchmark's loop.
//
//   generate_bench [--ranks 4] [--out-prefix docs/inference] [--max-seq 2048] [--decode-steps 16]
//   generate_bench --speed [--out-prefix docs/inference] [--prompt 512] [--new-tokens 128]
//                  [--precision fp32|bf16|both]
//
// 1. Prefill memory per rank as the prompt grows (one prompt of S tokens, S = 128 .. max-seq),
//    peak over the ranks of the tracker's peak total:
//      tsp     the engine's TSP prefill over D ranks (KV cache kept: Kv/D heads, all S)
//      tp      the tensor-parallel forward (mesh_ops, RankModel tp=D, forward only; the
//              gradient buffers RankModel allocates are subtracted) plus the same head-sharded
//              KV cache a TP engine would keep (2*L*S*Kv/D*d floats, added: its forward does
//              not keep one)
//      single  the engine on one device (D = 1: the same code)
//    and, under a per-rank cap (default: the single device's peak at S = 512), the longest S
//    of the sweep each fits.  -> PREFIX-prefill.csv
// 2. Decode tokens/s per batch size (1, 2, 4, 8, 16) at D = 1 and D: prompts of 64 tokens,
//    decode-steps greedy steps timed after the prefill.  -> PREFIX-decode.csv
// Model: h 256, 4 layers, 8 heads / 4 kv heads, f 688, vocabulary 256.
//
// --speed alone: the speed of issue 15's model (h 1024, 8 layers, 16 heads / 4 kv heads, f 2816,
// vocabulary 32000, 155.7 M parameters, F32 weights, random), one prompt of `prompt` random
// tokens, then new-tokens greedy decode steps (the cache holding the prompt), for single at 1
// and 2 threads and TSP at D = 2 of 1 thread: prefill and decode tokens/s, the weight bytes
// decode reads per second and the measured memory-read ceiling of as many threads
// (cli/machine_peak.h), with the CPU, SIMD target and precision (fp32; bf16: bf16 weights and
// KV cache, InferenceEngine::use_bf16; both: each row in fp32, then in bf16 with the bf16 ÷
// fp32 ratios).  -> PREFIX-speed.csv
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "origami/cli/machine_peak.h"
#include "origami/comm/run_ranks.h"
#include "origami/infer/engine.h"
#include "origami/kernels/cross_entropy.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/simd.h"
#include "origami/kernels/threads.h"
#include "origami/parallel/strategies/mesh/mesh_ops.h"
#include "origami/parallel/rank_model.h"

using namespace origami;

namespace {

ModelConfig bench_model() {
  ModelConfig c;
  c.vocab_size = 256;
  c.hidden_size = 256;
  c.intermediate_size = 688;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.max_position_embeddings = 8192;
  return c;
}

std::vector<std::int32_t> prompt(std::int64_t n, std::int64_t salt = 0) {
  std::vector<std::int32_t> p;
  for (std::int64_t i = 0; i < n; ++i)
    p.push_back(static_cast<std::int32_t>((i * 31 + salt * 7) % 256));
  return p;
}

// The stats of the rank with the highest peak total, after fn ran on every rank.
MemoryStats worst_rank(int D, const std::function<MemoryStats(comm::Communicator&)>& fn) {
  std::mutex m;
  MemoryStats worst;
  comm::run_ranks(D, [&](comm::Communicator& world) {
    const MemoryStats s = fn(world);
    std::lock_guard lock(m);
    if (s.peak_total >= worst.peak_total) worst = s;
  });
  return worst;
}

MemoryStats engine_prefill(const ModelConfig& c, int D, std::int64_t S) {
  return worst_rank(D, [&](comm::Communicator& world) {
    infer::InferenceEngine e(c, world, world.tracker());
    e.initialize(1);
    e.prefill({prompt(S)}, 0);
    return world.tracker().stats();
  });
}

// The TP forward's stats with its gradient buffers removed and the head-sharded KV cache a TP
// engine would keep added (to the total and to the KV cache column).
MemoryStats tp_prefill(const ModelConfig& c, int D, std::int64_t S) {
  return worst_rank(D, [&](comm::Communicator& world) {
    parallel::ParallelConfig plan;
    plan.tp = D;
    parallel::ParallelGroups groups(world, plan);
    parallel::RankModel model(c, groups, S, Recompute::None, world.tracker(), 1);
    const std::vector<std::int32_t> ids = prompt(S);
    std::vector<std::int32_t> labels(ids.size(), kernels::kIgnoreLabel);
    labels.back() = 0;
    const TokenBatch b{1, S, ids.data(), labels.data()};
    const parallel::LocalBatch local = model.localize(b);
    model.run(local, /*backward=*/false, 0.0);
    MemoryStats s = world.tracker().stats();
    const auto G = static_cast<std::size_t>(MemCategory::Gradients);
    const auto K = static_cast<std::size_t>(MemCategory::KvCache);
    const std::int64_t cache =
        2 * c.num_hidden_layers * S * (c.num_key_value_heads / D) * c.head_dim() * 4;
    s.peak_total += cache - s.peak[G];
    s.peak[G] = 0;
    s.peak[K] = cache;
    return s;
  });
}

double mib(std::int64_t b) {
  return static_cast<double>(b) / (1 << 20);
}

ModelConfig speed_model() {
  ModelConfig c;
  c.vocab_size = 32000;
  c.hidden_size = 1024;
  c.intermediate_size = 2816;
  c.num_hidden_layers = 8;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 4;
  c.max_position_embeddings = 4096;
  return c;
}

struct SpeedRun {
  double prefill_s = 0, decode_s = 0;
  std::int64_t step_weight_bytes = 0;  // all ranks together
};

// One prompt of `prompt_len` random ids prefilled (and its first token sampled), then
// `new_tokens` greedy decode steps; wall times of rank 0 between barriers.
SpeedRun speed_run(const ModelConfig& c, int ranks, int threads, std::int64_t prompt_len,
                   std::int64_t new_tokens, bool bf16) {
  std::mt19937 rng(15);
  std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(c.vocab_size - 1));
  std::vector<std::int32_t> ids(static_cast<std::size_t>(prompt_len));
  for (std::int32_t& t : ids) t = id(rng);
  SpeedRun run;
  std::mutex m;
  comm::RunOptions options;
  options.kernel_threads = threads;
  comm::run_ranks(
      ranks,
      [&](comm::Communicator& world) {
        infer::InferenceEngine e(c, world, world.tracker());
        e.initialize(1);
        if (bf16) e.use_bf16();
        const infer::SamplingOptions greedy;
        world.barrier();
        const auto t0 = std::chrono::steady_clock::now();
        const Tensor* logits = &e.prefill({ids}, new_tokens + 1);
        std::vector<std::int32_t> tok =
            infer::sample_tokens(e.axis(), logits->f32(), 1, e.vocab(), greedy, 0);
        world.barrier();
        const auto t1 = std::chrono::steady_clock::now();
        for (std::int64_t t = 1; t <= new_tokens; ++t) {
          logits = &e.decode(tok);
          tok = infer::sample_tokens(e.axis(), logits->f32(), 1, e.vocab(), greedy, t);
        }
        world.barrier();
        const auto t2 = std::chrono::steady_clock::now();
        std::lock_guard lock(m);
        run.step_weight_bytes += e.step_weight_bytes();
        if (world.rank() == 0) {
          run.prefill_s = std::chrono::duration<double>(t1 - t0).count();
          run.decode_s = std::chrono::duration<double>(t2 - t1).count();
        }
      },
      options);
  return run;
}

int speed(const std::string& prefix, std::int64_t prompt_len, std::int64_t new_tokens,
          const std::string& precision) {
  const ModelConfig c = speed_model();
  std::vector<bool> precisions;  // bf16 or not
  if (precision == "fp32" || precision == "both") precisions.push_back(false);
  if (precision == "bf16" || precision == "both") precisions.push_back(true);
  if (precisions.empty()) {
    std::fprintf(stderr, "--precision %s: use fp32, bf16 or both\n", precision.c_str());
    return 2;
  }
  std::printf(
      "cpu: %s\nsimd_target: %s\nprecision: %s (fp32: f32 weights and KV cache; bf16: "
      "bf16 weights and KV cache, fp32 accumulation; bf16 prefill: %s)\n",
      cli::cpu_model_name().c_str(), kernels::simd_target().c_str(), precision.c_str(),
      kernels::linear_forward_bf16_path().c_str());
  std::printf(
      "model: h %lld, %lld layers, %lld heads / %lld kv heads, f %lld, vocabulary %lld "
      "(%.1f M parameters); prompt %lld tokens, %lld decode steps\n",
      static_cast<long long>(c.hidden_size), static_cast<long long>(c.num_hidden_layers),
      static_cast<long long>(c.num_attention_heads), static_cast<long long>(c.num_key_value_heads),
      static_cast<long long>(c.intermediate_size), static_cast<long long>(c.vocab_size),
      static_cast<double>(c.num_parameters()) / 1e6, static_cast<long long>(prompt_len),
      static_cast<long long>(new_tokens));
  struct Row {
    const char* strategy;
    int ranks, threads;
  };
  const Row rows[] = {{"single", 1, 1}, {"single", 1, 2}, {"tsp", 2, 1}};
  std::ofstream csv(prefix + "-speed.csv");
  csv << "strategy,ranks,threads_per_rank,precision,prefill_tokens_per_s,decode_tokens_per_s,"
         "weight_read_gb_per_s,read_ceiling_gb_per_s\n";
  std::printf("%-8s %5s %7s %9s %12s %12s %14s %16s\n", "strategy", "ranks", "threads", "precision",
              "prefill t/s", "decode t/s", "weights GB/s", "ceiling GB/s");
  for (const Row& r : rows) {
    const cli::MemoryBandwidth ceiling = cli::memory_bandwidth(r.ranks * r.threads);
    double fp32_prefill = 0, fp32_decode = 0;
    for (bool bf16 : precisions) {
      const SpeedRun s = speed_run(c, r.ranks, r.threads, prompt_len, new_tokens, bf16);
      const double prefill = static_cast<double>(prompt_len) / s.prefill_s;
      const double decode = static_cast<double>(new_tokens) / s.decode_s;
      const double gbs = static_cast<double>(s.step_weight_bytes) * decode / 1e9;
      const char* name = bf16 ? "bf16" : "fp32";
      csv << fmt::format("{},{},{},{},{:.1f},{:.2f},{:.2f},{:.2f}\n", r.strategy, r.ranks,
                         r.threads, name, prefill, decode, gbs, ceiling.read_gbs);
      std::printf("%-8s %5d %7d %9s %12.1f %12.2f %14.2f %10.2f (%.0f%%)", r.strategy, r.ranks,
                  r.threads, name, prefill, decode, gbs, ceiling.read_gbs,
                  100.0 * gbs / ceiling.read_gbs);
      if (bf16 && fp32_decode > 0)
        std::printf("  bf16/fp32: prefill %.2fx, decode %.2fx", prefill / fp32_prefill,
                    decode / fp32_decode);
      std::printf("\n");
      std::fflush(stdout);
      if (!bf16) {
        fp32_prefill = prefill;
        fp32_decode = decode;
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int D = 4;
  std::string prefix = "docs/inference";
  std::int64_t max_seq = 2048, decode_steps = 16, cap = 0, prompt_len = 512, new_tokens = 128;
  bool speed_only = false;
  std::string precision = "fp32";
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--speed") {
      speed_only = true;
      --i;  // a flag without a value
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", k.c_str());
      return 2;
    }
    const char* v = argv[i + 1];
    if (k == "--prompt")
      prompt_len = std::atoll(v);
    else if (k == "--new-tokens")
      new_tokens = std::atoll(v);
    else if (k == "--ranks")
      D = std::atoi(v);
    else if (k == "--out-prefix")
      prefix = v;
    else if (k == "--max-seq")
      max_seq = std::atoll(v);
    else if (k == "--decode-steps")
      decode_steps = std::atoll(v);
    else if (k == "--precision")
      precision = v;
    else if (k == "--cap-mib")
      cap = std::atoll(v) << 20;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  kernels::set_thread_count(1);
  if (speed_only) return speed(prefix, prompt_len, new_tokens, precision);
  const ModelConfig c = bench_model();
  // 1. Prefill memory.
  std::vector<std::int64_t> seqs;
  for (std::int64_t s = 128; s <= max_seq; s *= 2) seqs.push_back(s);
  std::ofstream pre(prefix + "-prefill.csv");
  pre << "seq,tsp_mib,tp_mib,single_mib\n";
  std::vector<std::array<std::int64_t, 3>> peaks;
  for (std::int64_t S : seqs) {
    const std::array<MemoryStats, 3> st{engine_prefill(c, D, S), tp_prefill(c, D, S),
                                        engine_prefill(c, 1, S)};
    const std::array<std::int64_t, 3> p{st[0].peak_total, st[1].peak_total, st[2].peak_total};
    if (S == seqs.back()) {
      std::printf("per-category peaks at S=%lld (worst rank):\n%-24s %10s %10s %10s\n",
                  static_cast<long long>(S), "category", "tsp", "tp", "single");
      for (int k = 0; k < kNumMemCategories; ++k) {
        const auto i = static_cast<std::size_t>(k);
        std::printf("%-24s %10.2f %10.2f %10.2f\n",
                    std::string(mem_category_name(static_cast<MemCategory>(k))).c_str(),
                    mib(st[0].peak[i]), mib(st[1].peak[i]), mib(st[2].peak[i]));
      }
    }
    peaks.push_back(p);
    pre << fmt::format("{},{:.3f},{:.3f},{:.3f}\n", S, mib(p[0]), mib(p[1]), mib(p[2]));
    std::printf("prefill S=%5lld  tsp %8.2f MiB  tp %8.2f MiB  single %8.2f MiB (per rank, D=%d)\n",
                static_cast<long long>(S), mib(p[0]), mib(p[1]), mib(p[2]), D);
    std::fflush(stdout);
  }
  if (cap == 0) {
    const auto at = std::find(seqs.begin(), seqs.end(), 512);
    cap =
        at != seqs.end() ? peaks[static_cast<std::size_t>(at - seqs.begin())][2] : peaks.back()[2];
  }
  const char* names[] = {"tsp", "tp", "single"};
  for (int k = 0; k < 3; ++k) {
    std::int64_t longest = 0;
    for (std::size_t i = 0; i < seqs.size(); ++i)
      if (peaks[i][static_cast<std::size_t>(k)] <= cap) longest = seqs[i];
    std::printf("cap %.2f MiB per rank: longest prompt of the sweep that fits, %s: %lld\n",
                mib(cap), names[k], static_cast<long long>(longest));
  }
  // 2. Decode tokens/s per batch size.
  std::ofstream dec(prefix + "-decode.csv");
  dec << "batch,ranks,tokens_per_s\n";
  for (int ranks : {1, D}) {
    for (std::int64_t B : {1, 2, 4, 8, 16}) {
      double seconds = 0;
      comm::run_ranks(ranks, [&](comm::Communicator& world) {
        infer::InferenceEngine e(c, world, world.tracker());
        e.initialize(1);
        std::vector<std::vector<std::int32_t>> prompts;
        for (std::int64_t b = 0; b < B; ++b) prompts.push_back(prompt(64, b));
        const Tensor* logits = &e.prefill(prompts, decode_steps + 1);
        const infer::SamplingOptions greedy;
        std::vector<std::int32_t> tok =
            infer::sample_tokens(e.axis(), logits->f32(), B, e.vocab(), greedy, 0);
        world.barrier();
        const auto t0 = std::chrono::steady_clock::now();
        for (std::int64_t t = 1; t <= decode_steps; ++t) {
          logits = &e.decode(tok);
          tok = infer::sample_tokens(e.axis(), logits->f32(), B, e.vocab(), greedy, t);
        }
        world.barrier();
        if (world.rank() == 0)
          seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      });
      const double tps = static_cast<double>(B * decode_steps) / seconds;
      dec << fmt::format("{},{},{:.1f}\n", B, ranks, tps);
      std::printf("decode D=%d batch %2lld: %8.1f tokens/s\n", ranks, static_cast<long long>(B),
                  tps);
      std::fflush(stdout);
    }
  }
  return 0;
}
