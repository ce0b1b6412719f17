// TSP overlap with the link model on: per kind of transfer, the communication time (issue to
// completion, summed over calls) and the part of it the ranks spent blocked in wait()
// (exposed), for one forward+backward after a warm-up, world rank 0. A plain main(): the
// multi-rank timing does not fit Google Benchmark's loop.
//
//   tsp_overlap_bench [--ranks 4] [--hidden 256] [--layers 4] [--seq 256] [--batch 2]
//                     [--alpha 5e-6] [--beta 1e9] [--threads 1]
//
// Kinds: broadcast = attention shards (prefetched), send/recv = MLP and head ring hops,
// all_gather = K/V, reduce_scatter = dK/dV, reduce = attention weight gradients to their
// owners, all_to_all = the embedding.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "origami/comm/run_ranks.h"
#include "origami/kernels/threads.h"
#include "origami/model/driver.h"
#include "origami/parallel/tsp_ops.h"

using namespace origami;

int main(int argc, char** argv) {
  int ranks = 4, threads = 1;
  std::int64_t hidden = 256, layers = 4, seq = 256, batch = 2;
  double alpha = 5e-6, beta = 1e9;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--ranks")
      ranks = std::atoi(v);
    else if (k == "--hidden")
      hidden = std::atoll(v);
    else if (k == "--layers")
      layers = std::atoll(v);
    else if (k == "--seq")
      seq = std::atoll(v);
    else if (k == "--batch")
      batch = std::atoll(v);
    else if (k == "--alpha")
      alpha = std::atof(v);
    else if (k == "--beta")
      beta = std::atof(v);
    else if (k == "--threads")
      threads = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  ModelConfig m;
  m.vocab_size = 256;
  m.hidden_size = hidden;
  m.intermediate_size = hidden * 11 / 4 / ranks * ranks;
  m.num_hidden_layers = layers;
  m.num_attention_heads = hidden / 64;
  m.num_key_value_heads = hidden / 64;
  m.max_position_embeddings = seq;
  parallel::ParallelConfig p;
  p.sp = ranks;
  p.tsp = true;
  parallel::validate_plan(p, m, seq, batch, ranks);
  comm::RunOptions opt;
  opt.link.enabled = true;
  opt.link.intra_alpha_s = opt.link.inter_alpha_s = alpha;
  opt.link.intra_beta_Bps = opt.link.inter_beta_Bps = beta;
  comm::run_ranks(
      ranks,
      [&](comm::Communicator& world) {
        kernels::set_thread_count(threads);
        MemoryTracker& tracker = world.tracker();
        parallel::ParallelGroups groups(world, p);
        const parallel::Strategy strategy = parallel::tsp_strategy(m, groups);
        const parallel::TokenLayout layout(p.layout, seq, ranks, world.rank());
        ModelTensors params =
            parallel::allocate_sharded(m, strategy.specs, tracker, MemCategory::Parameters);
        ModelTensors grads =
            parallel::allocate_sharded(m, strategy.specs, tracker, MemCategory::Gradients);
        parallel::initialize_sharded(params, strategy.specs, m, 1234);
        parallel::TspOps ops(m, groups, layout, params, grads, tracker);
        ModelDriver driver(m, params, grads, ops, tracker, Recompute::None);
        std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * seq));
        for (std::size_t i = 0; i < ids.size(); ++i)
          ids[i] = static_cast<std::int32_t>(i * 7 % 256);
        const parallel::LocalBatch local{batch, layout.slice(ids.data(), batch),
                                         layout.slice(ids.data(), batch)};
        ops.set_batch(&local);
        driver.run(true, 1e-3);  // warm-up
        groups.sp().reset_stats();
        ops.shard_comm().reset_stats();
        const auto t0 = std::chrono::steady_clock::now();
        driver.run(true, 1e-3);
        const double step =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ops.set_batch(nullptr);
        if (world.rank() != 0) return;
        std::printf(
            "TSP D=%d h=%lld L=%lld S=%lld B=%lld, link alpha %.1e s beta %.2e B/s; "
            "forward+backward %.3f s (rank 0)\n",
            ranks, static_cast<long long>(hidden), static_cast<long long>(layers),
            static_cast<long long>(seq), static_cast<long long>(batch), alpha, beta, step);
        std::printf("%-16s %8s %12s %12s %12s %9s\n", "kind", "calls", "MB sent", "comm s",
                    "exposed s", "exposed");
        for (const comm::CommStats& s : {ops.shard_comm().stats(), groups.sp().stats()})
          for (const auto& [kind, o] : s.ops) {
            if (o.calls == 0 && o.bytes_sent == 0) continue;
            std::printf("%-16s %8lld %12.3f %12.4f %12.4f %8.1f%%\n", kind.c_str(),
                        static_cast<long long>(o.calls), o.bytes_sent / 1e6, o.time_s, o.exposed_s,
                        o.time_s > 0 ? 100.0 * o.exposed_s / o.time_s : 0.0);
          }
      },
      opt);
  return 0;
}
