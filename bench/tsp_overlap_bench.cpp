// TSP overlap with the link model on: per block kind and direction (attention, MLP, LM head,
// embedding; forward, backward) and per kind of transfer, the communication time (issue to
// completion, summed over calls) and the part of it the rank spent blocked in wait()
// (exposed), for one forward+backward after a warm-up, world rank 0; and the compute time of
// each block (its wall time minus the exposed waits), to check the link model's premise that
// a shard's transfer takes no longer than its GEMMs. A plain main(): the multi-rank timing
// does not fit Google Benchmark's loop.
//
//   tsp_overlap_bench [--ranks 4] [--hidden 256] [--layers 4] [--seq 256] [--batch 2]
//                     [--alpha 5e-6] [--beta 1e9] [--threads 1]
//
// Kinds: broadcast = attention shards (prefetched), all_gather = K/V, reduce_scatter = dK/dV,
// reduce = attention weight gradients to their owners (attention); send/recv = ring hops
// (MLP, head); all_to_all = the embedding. Blocks are attributed by the call a transfer
// completes or is waited in: the attention rows sum the attention kinds over all calls of
// the direction (a prefetched P_0 completes during the MLP), the ring rows the MLP's and the
// head's own calls.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "origami/comm/run_ranks.h"
#include "origami/kernels/threads.h"
#include "origami/model/driver.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"
#include "origami/parallel/registry.h"

using namespace origami;

namespace {

// Forwards to TSP's blocks and attributes the communicators' stats and the wall time of each
// call to (block, direction).
struct Tally {
  std::map<std::string, comm::OpStats> kinds;
  double wall_s = 0;
};

class TimedOps final : public BlockOps {
 public:
  TimedOps(parallel::TspOps& ops, std::vector<comm::Communicator*> comms)
      : ops_(ops), comms_(std::move(comms)) {}
  std::map<std::string, Tally> tally;  // "attention fwd", "mlp bwd", ...

  std::int64_t stream_rows() const override { return ops_.stream_rows(); }
  void embed_forward(float* x) override {
    timed("embedding fwd", [&] { ops_.embed_forward(x); });
  }
  void embed_backward(const float* dx) override {
    timed("embedding bwd", [&] { ops_.embed_backward(dx); });
  }
  void attention_forward(std::int64_t l, const float* n, AttentionSaved& s, float* x,
                         const ForwardStep& step) override {
    timed("attention fwd", [&] { ops_.attention_forward(l, n, s, x, step); });
  }
  void attention_backward(std::int64_t l, const float* n, const AttentionSaved& s,
                          const float* dx, float* dn) override {
    timed("attention bwd", [&] { ops_.attention_backward(l, n, s, dx, dn); });
  }
  void mlp_forward(std::int64_t l, const float* n, MlpSaved& s, float* x) override {
    timed("mlp fwd", [&] { ops_.mlp_forward(l, n, s, x); });
  }
  void mlp_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dx,
                    float* dn) override {
    timed("mlp bwd", [&] { ops_.mlp_backward(l, n, s, dx, dn); });
  }
  kernels::LossSum head_forward(const float* nf, bool with_backward) override {
    kernels::LossSum r{};
    timed("head fwd", [&] { r = ops_.head_forward(nf, with_backward); });
    return r;
  }
  void head_backward(float grad_scale, float* dnf) override {
    timed("head bwd", [&] { ops_.head_backward(grad_scale, dnf); });
  }

 private:
  std::map<std::string, comm::OpStats> snapshot() const {
    std::map<std::string, comm::OpStats> all;
    for (comm::Communicator* c : comms_)
      for (const auto& [kind, o] : c->stats().ops) all[kind] += o;
    return all;
  }
  template <class F>
  void timed(const std::string& block, F&& f) {
    const auto before = snapshot();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    Tally& t = tally[block];
    t.wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& [kind, o] : snapshot()) {
      comm::OpStats d = o;
      const auto it = before.find(kind);
      if (it != before.end()) {
        d.calls -= it->second.calls;
        d.bytes_sent -= it->second.bytes_sent;
        d.time_s -= it->second.time_s;
        d.exposed_s -= it->second.exposed_s;
      }
      t.kinds[kind] += d;
    }
  }
  parallel::TspOps& ops_;
  std::vector<comm::Communicator*> comms_;
};

void print_row(const std::string& name, const comm::OpStats& o) {
  std::printf("%-28s %7lld %10.3f %10.4f %10.4f %8.1f%%\n", name.c_str(),
              static_cast<long long>(o.calls), o.bytes_sent / 1e6, o.time_s, o.exposed_s,
              o.time_s > 0 ? 100.0 * o.exposed_s / o.time_s : 0.0);
}

}  // namespace

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
  p.tsp = ranks;
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
        TimedOps timed(ops, {&groups.tsp(), &ops.shard_comm(), &ops.grad_comm()});
        ModelDriver driver(m, params, grads, timed, tracker, Recompute::None);
        std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * seq));
        for (std::size_t i = 0; i < ids.size(); ++i)
          ids[i] = static_cast<std::int32_t>(i * 7 % 256);
        const parallel::LocalBatch local{batch, layout.slice(ids.data(), batch),
                                         layout.slice(ids.data(), batch)};
        ops.set_batch(&local);
        driver.run(true, 1e-3);  // warm-up
        groups.tsp().reset_stats();
        ops.shard_comm().reset_stats();
        ops.grad_comm().reset_stats();
        timed.tally.clear();
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
        // Per block: its wall time, the exposed waits inside it, the compute left.
        std::printf("%-16s %10s %10s %10s\n", "block", "wall s", "waited s", "compute s");
        for (const auto& [block, t] : timed.tally) {
          double waited = 0;
          for (const auto& [kind, o] : t.kinds) waited += o.exposed_s;
          std::printf("%-16s %10.4f %10.4f %10.4f\n", block.c_str(), t.wall_s, waited,
                      t.wall_s - waited);
        }
        // The link model's premise, per shard step: modelled transfer (alpha + bytes/beta per
        // hop; the ring all-gather of K and V takes D-1 hops each) against the measured
        // compute of one step (the block's compute / (layers * D)).
        const double D = ranks, R = double(batch) * double(seq) / D, h = double(hidden);
        const double qd = h / D, kvd = double(m.num_key_value_heads) * 64 / D;
        const double f = double(m.intermediate_size) / D;
        const double steps = double(layers) * D;
        auto compute = [&](const char* block) {
          const Tally& t = timed.tally[block];
          double waited = 0;
          for (const auto& [kind, o] : t.kinds) waited += o.exposed_s;
          return (t.wall_s - waited) / steps;
        };
        const double mlp_hop = alpha + 3 * f * h * 4 / beta;
        const double shard_hop = alpha + 2 * (qd + kvd) * h * 4 / beta;
        const double kv_gather = 2 * (D - 1) * (alpha + R * kvd * 4 / beta);
        std::printf(
            "premise per step: MLP shard hop %.2e s vs MLP fwd compute %.2e s; attention shard "
            "%.2e s + K/V gather %.2e s vs attention fwd compute %.2e s\n",
            mlp_hop, compute("mlp fwd"), shard_hop, kv_gather, compute("attention fwd"));
        std::printf("\n%-28s %7s %10s %10s %10s %9s\n", "block / kind", "calls", "MB sent",
                    "comm s", "exposed s", "exposed");
        const std::map<std::string, std::vector<std::string>> rows = {
            {"attention", {"broadcast", "all_gather", "reduce_scatter", "reduce"}},
            {"mlp", {"send", "recv"}},
            {"head", {"send", "recv"}},
            {"embedding", {"all_to_all"}}};
        for (const char* dir : {"fwd", "bwd"}) {
          for (const char* block : {"attention", "mlp", "head", "embedding"}) {
            comm::OpStats sum;
            std::map<std::string, comm::OpStats> per;
            const std::string b = block;
            // Attention kinds from every call of the direction; ring kinds from the block's.
            for (const auto& [name, t] : timed.tally) {
              if (name.find(dir) == std::string::npos) continue;
              if (b != "attention" && name.rfind(b, 0) != 0) continue;
              for (const std::string& kind : rows.at(b)) {
                const auto it = t.kinds.find(kind);
                if (it == t.kinds.end()) continue;
                per[kind] += it->second;
                sum += it->second;
              }
            }
            if (sum.calls == 0 && sum.time_s == 0) continue;
            print_row(fmt::format("{} {}", block, dir), sum);
            for (const auto& [kind, o] : per) print_row(fmt::format("  {}", kind), o);
          }
        }
      },
      opt);
  return 0;
}
