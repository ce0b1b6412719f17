#include "origami/train/dry_run.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "origami/comm/run_ranks.h"
#include "origami/core/dry_run.h"
#include "origami/kernels/cross_entropy.h"
#include "origami/parallel/rank_model.h"
#include "origami/train/optimizer.h"

namespace origami {

namespace {

// Deterministic token ids (the data does not matter to the schedule, only its shape; the
// labels are all unmasked so every rank's count is real).
void synthetic_batch(std::int64_t B, std::int64_t S, std::int64_t vocab, std::uint64_t seed,
                     std::int64_t step, std::int32_t* ids, std::int32_t* labels) {
  for (std::int64_t i = 0; i < B * S; ++i) {
    const std::uint64_t x =
        seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(step * B * S + i) * 7919u;
    ids[i] = static_cast<std::int32_t>(x % static_cast<std::uint64_t>(vocab));
    labels[i] = static_cast<std::int32_t>((x + 7919u) % static_cast<std::uint64_t>(vocab));
  }
}

struct RankOutput {
  DryRunRank rank;
};

void run_rank(const ModelConfig& model, const parallel::ParallelConfig& plan,
              const DryRunOptions& o, comm::Communicator& world, DryRunRank& out) {
  dryrun::Clock clock;
  clock.flop_rate = o.flop_rate;
  clock.comm_elem_bytes = o.precision.communication;
  const dryrun::Install installed(o.execute ? nullptr : &clock);
  MemoryTracker& tracker = world.tracker();
  parallel::ParallelGroups groups(world, plan);
  parallel::RankModel rank_model(model, groups, o.seq, parse_recompute(o.recompute), tracker,
                                 o.seed);
  AdamW optimizer(rank_model.params(), tracker,
                  {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f});
  const int P = groups.dp().size(), p = groups.dp().rank();
  const std::int64_t per = o.batch / P;
  for (std::int64_t step = 1; step <= o.steps; ++step) {
    const double start = clock.now_s;
    std::vector<parallel::LocalBatch> micro;
    for (std::int64_t m = 0; m < o.grad_accum; ++m) {
      // As the trainer's sampler: the global batch in the tracker's workspace, the rank's share.
      Tensor ids(tracker, MemCategory::Workspace, DType::I32, {o.batch, o.seq});
      Tensor labels(tracker, MemCategory::Workspace, DType::I32, {o.batch, o.seq});
      synthetic_batch(o.batch, o.seq, model.vocab_size, o.seed, (step - 1) * o.grad_accum + m,
                      ids.data<std::int32_t>(), labels.data<std::int32_t>());
      const TokenBatch mine{per, o.seq, ids.data<std::int32_t>() + p * per * o.seq,
                            labels.data<std::int32_t>() + p * per * o.seq};
      micro.push_back(rank_model.localize(mine));
    }
    parallel::parallel_train_step(rank_model, optimizer, micro, 1e-3f, 1.0);
    out.step_s = clock.now_s - start;
  }
  out.memory = tracker.stats();
  for (comm::CommStats& s : world.family_stats()) {
    if (s.ops.empty()) continue;
    std::string name = s.comm;
    for (int i = 2; out.comm.count(name) > 0; ++i) name = fmt::format("{}#{}", s.comm, i);
    out.comm[name] = std::move(s);
  }
  for (const auto& [axis, s] : out.comm)
    for (const auto& [kind, st] : s.ops) out.comm_total.ops[kind] += st;
  out.clock_s = clock.now_s;
  out.compute_s = clock.compute_s;
  out.flops = clock.flops;
}

}  // namespace

DryRunReport dry_run(const ModelConfig& model, const parallel::ParallelConfig& plan,
                     const DryRunOptions& o) {
  if (!(o.flop_rate > 0))
    throw ConfigError(fmt::format("the FLOP rate must be > 0, got {}", o.flop_rate));
  if (o.steps < 1 || o.grad_accum < 1 || o.batch < 1)
    throw ConfigError("steps, micro-batches per step and the batch must be >= 1");
  if (o.execute && o.precision.name != "fp32")
    throw ConfigError("a computed (execute) run is fp32 only: the kernels compute in fp32");
  parse_recompute(o.recompute);
  const int world = plan.world();
  parallel::validate_plan(plan, model, o.seq, o.batch, world);
  comm::LinkModel link = o.link;
  link.enabled = true;
  link.validate();

  std::vector<std::unique_ptr<MemoryTracker>> owned;
  std::vector<MemoryTracker*> trackers;
  for (int r = 0; r < world; ++r) {
    owned.push_back(std::make_unique<MemoryTracker>(fmt::format("rank {}", r)));
    owned.back()->set_cap(o.memory_cap);
    if (!o.execute) {
      owned.back()->set_backs_memory(false);
      o.precision.apply_to(*owned.back());
    }
    trackers.push_back(owned.back().get());
  }
  std::vector<DryRunRank> ranks(static_cast<std::size_t>(world));
  comm::RunOptions ro;
  if (!o.execute) {
    ro.link = link;
    ro.virtual_time = true;
  }
  comm::run_ranks(
      trackers,
      [&](comm::Communicator& c) {
        run_rank(model, plan, o, c, ranks[static_cast<std::size_t>(c.rank())]);
      },
      ro);
  DryRunReport r;
  r.ranks = std::move(ranks);
  for (const DryRunRank& k : r.ranks) r.step_s = std::max(r.step_s, k.step_s);
  const double tokens = static_cast<double>(o.batch * o.seq * o.grad_accum);
  r.tokens_per_s = r.step_s > 0 ? tokens / r.step_s : 0.0;
  r.describe = plan.describe();
  return r;
}

std::string DryRunReport::summary() const {
  std::string out = "peak memory per rank by category:\nrank";
  std::vector<std::size_t> width;
  for (int c = 0; c < kNumMemCategories; ++c) {
    const std::string_view name = mem_category_name(static_cast<MemCategory>(c));
    width.push_back(std::max<std::size_t>(12, name.size() + 2));
    out += fmt::format("{:>{}}", name, width.back());
  }
  out += fmt::format("{:>14}\n", "peak total");
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    out += fmt::format("{:<4}", r);
    for (int c = 0; c < kNumMemCategories; ++c)
      out += fmt::format("{:>{}}", format_bytes(ranks[r].memory.peak[static_cast<std::size_t>(c)]),
                         width[static_cast<std::size_t>(c)]);
    out += fmt::format("{:>14}\n", format_bytes(ranks[r].memory.peak_total));
  }
  out += "bytes per rank by operation (sent / received, all axes):\n";
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    out += fmt::format("{:<4}", r);
    for (const auto& [kind, s] : ranks[r].comm_total.ops) {
      if (s.bytes_sent == 0 && s.bytes_received == 0) continue;
      out += fmt::format("  {} {} / {}", kind, format_bytes(s.bytes_sent),
                         format_bytes(s.bytes_received));
    }
    out += "\n";
  }
  out += "virtual communication time and exposed (waited) time by operation, whole run:\n";
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    out += fmt::format("{:<4}", r);
    double time_s = 0, exposed_s = 0;
    for (const auto& [kind, s] : ranks[r].comm_total.ops) {
      if (s.time_s <= 0) continue;
      out += fmt::format("  {} {:.4g}/{:.4g} s", kind, s.time_s, s.exposed_s);
      time_s += s.time_s;
      exposed_s += s.exposed_s;
    }
    out += fmt::format("  | all {:.4g}/{:.4g} s ({:.1f}% exposed)\n", time_s, exposed_s,
                       time_s > 0 ? 100 * exposed_s / time_s : 0.0);
  }
  out += "virtual time per rank (last step, of which kernels over the whole run):\n";
  for (std::size_t r = 0; r < ranks.size(); ++r)
    out += fmt::format("{:<4}  step {:.6f} s  compute {:.6f} s  {:.4g} TFLOP\n", r, ranks[r].step_s,
                       ranks[r].compute_s, ranks[r].flops / 1e12);
  out += fmt::format("step time {:.6f} s (slowest rank), {:.0f} tokens/s\n", step_s, tokens_per_s);
  return out;
}

std::string DryRunReport::to_json() const {
  nlohmann::json j;
  j["plan"] = describe;
  j["step_s"] = step_s;
  j["tokens_per_s"] = tokens_per_s;
  j["ranks"] = nlohmann::json::array();
  for (const DryRunRank& k : ranks) {
    nlohmann::json rj;
    nlohmann::json peak, cur;
    for (int c = 0; c < kNumMemCategories; ++c) {
      const std::string name(mem_category_name(static_cast<MemCategory>(c)));
      peak[name] = k.memory.peak[static_cast<std::size_t>(c)];
      cur[name] = k.memory.current[static_cast<std::size_t>(c)];
    }
    peak["total"] = k.memory.peak_total;
    rj["peak_bytes"] = peak;
    rj["current_bytes"] = cur;
    nlohmann::json comm;
    for (const auto& [axis, s] : k.comm) {
      nlohmann::json a;
      for (const auto& [kind, st] : s.ops)
        a[kind] = {{"calls", st.calls},
                   {"bytes_sent", st.bytes_sent},
                   {"bytes_received", st.bytes_received}};
      comm[axis] = a;
    }
    rj["comm"] = comm;
    rj["clock_s"] = k.clock_s;
    rj["step_s"] = k.step_s;
    rj["compute_s"] = k.compute_s;
    rj["flops"] = k.flops;
    j["ranks"].push_back(rj);
  }
  return j.dump(2);
}

}  // namespace origami
