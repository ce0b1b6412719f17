// One measured training step of one parallel strategy over in-process ranks (threads
// transport, optionally under a link model), for bench/strategies_bench.cpp and
// bench/plan_wallclock_bench.cpp: every rank's peak bytes per tracker category, its
// communication per op kind summed over all its communicators (the world, the mesh axes and
// TSP's shard communicator), the steps' wall and process CPU time and, on request, each
// step's own wall time. A step that runs over the per-rank memory cap comes back as a failure
// carrying the OutOfBudget message.
#pragma once

#include <malloc.h>
#include <time.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "origami/comm/run_ranks.h"
#include "origami/core/error.h"
#include "origami/kernels/threads.h"
#include "origami/parallel/pipeline_schedule.h"
#include "origami/parallel/strategies/mesh/mesh_ops.h"
#include "origami/parallel/rank_model.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"
#include "origami/parallel/registry.h"
#include "origami/train/rank_step.h"

namespace origami::bench {

struct StrategyCase {
  std::string name;  // single, dp, tp, tpsp, sp, tpxsp, tsp
  parallel::ParallelConfig plan;
};

// The strategies at equal degree D (TP+SP as a 2 x D/2 mesh; single on one rank).
inline StrategyCase strategy_case(const std::string& name, int D) {
  using parallel::make_parallel_config;
  const auto zz = parallel::TokenLayoutKind::Zigzag;
  if (name == "single") return {name, make_parallel_config("single", 1, "", false, zz)};
  if (name == "dp" || name == "tp" || name == "tpsp" || name == "sp" || name == "tsp")
    return {name, make_parallel_config(name, D, "", false, zz)};
  if (name == "tsp-allgather") {  // TSP's layout, the allgather schedule (docs/tsp.md)
    parallel::ParallelConfig p = make_parallel_config("tsp", D, "", false, zz);
    p.tsp_schedule = parallel::TspSchedule::Allgather;
    return {name, p};
  }
  if (name == "tpxsp") {
    if (D % 2 != 0 || D < 4)
      throw ConfigError(fmt::format("tpxsp needs an even degree >= 4 (tp=2 x sp=D/2), got {}", D));
    return {name, make_parallel_config("tp", 1, fmt::format("tp=2,sp={}", D / 2), false, zz)};
  }
  throw ConfigError(
      fmt::format("unknown strategy '{}'; use single, dp, tp, tpsp, sp, tpxsp, tsp or "
                  "tsp-allgather",
                  name));
}

struct RankFigures {
  std::array<std::int64_t, kNumMemCategories> peak{};
  std::int64_t peak_total = 0;
  std::map<std::string, comm::OpStats> ops;  // per op kind, every communicator of the rank
  // Pipeline plans: the measured steps' seconds in the pipeline and, of them, waited for the
  // neighbouring stages (RankModel::pipeline_seconds, pipeline_wait_seconds), summed.
  double pipeline_s = 0, pipeline_wait_s = 0;
};

struct StepRun {
  bool ok = false;
  std::string error;  // the OutOfBudget message when !ok
  std::vector<RankFigures> ranks;
  double wall_s = 0, cpu_s = 0;  // the measured steps (all ranks, between two barriers)
  std::vector<double> step_wall_s;  // each measured step's wall time (StepOptions::time_each)
  double loss = 0;
};

struct StepOptions {
  std::int64_t seq = 1024, batch = 1;  // the job's micro-batch, batch / dp per replica
  int micro_batches = 1;  // micro-batches per step (the same tokens each; a pipeline's m)
  Recompute recompute = Recompute::None;
  int warmup = 1;   // steps before the measured ones (peaks and stats reset after them)
  int steps = 1;    // measured steps
  int threads = 2;  // kernel threads in all: each of N ranks gets max(1, threads / N)
  std::optional<std::int64_t> cap;  // per rank
  comm::LinkModel link;
  std::uint64_t seed = 1234;
  // A barrier after every measured step and each step's wall time in StepRun::step_wall_s
  // (the barriers' own cost, a few alpha under a link model, is counted in the step's time).
  bool time_each = false;
  // Training's precision (core/precision.h): bf16 reads a compute copy (and TSP moves it).
  Precision precision = Precision::fp32();
};

inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Runs warm-up + measured steps of `sc` on `m`; ConfigError (refused plan) propagates.
inline StepRun run_step(const ModelConfig& m, const StrategyCase& sc, const StepOptions& o) {
  const int world_size = sc.plan.world();
  // The same job on every strategy: its micro-batch must give each replica whole sequences.
  if (o.batch % sc.plan.dp != 0)
    throw ConfigError(fmt::format("the job's micro-batch of {} sequences does not give each of "
                                  "dp={} replicas the same number; use a multiple of {}",
                                  o.batch, sc.plan.dp, sc.plan.dp));
  parallel::validate_plan(sc.plan, m, o.seq, o.batch / sc.plan.dp, world_size);  // per replica
  parallel::check_pipeline_schedule(sc.plan.pp, sc.plan.pp_virtual, o.micro_batches);
  // Random tokens, the same for every strategy: memory and time do not depend on them.
  std::mt19937 gen(static_cast<unsigned>(o.seed));
  std::vector<std::int32_t> ids(static_cast<std::size_t>(o.batch * o.seq)), labels(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<std::int32_t>(gen() % static_cast<unsigned>(m.vocab_size));
    labels[i] = static_cast<std::int32_t>(gen() % static_cast<unsigned>(m.vocab_size));
  }
  StepRun run;
  run.ranks.resize(static_cast<std::size_t>(world_size));
  comm::RunOptions ro;
  ro.memory_cap = o.cap;
  ro.link = o.link;
  const int per_rank = std::max(1, o.threads / world_size);
  try {
    comm::run_ranks(
        world_size,
        [&](comm::Communicator& world) {
          kernels::set_thread_count(per_rank);
          MemoryTracker& tracker = world.tracker();
          parallel::ParallelGroups groups(world, sc.plan);
          std::vector<comm::Communicator> comms = {world, groups.dp(), groups.tp(),
                                                   groups.tokens()};
          if (sc.plan.pp > 1) comms.push_back(groups.pp());  // the stage boundaries' sends
          parallel::Strategy strategy = parallel::make_strategy(m, groups);
          // TSP's weight traffic and its weight-gradient reductions run on their own
          // communicators: keep a reference to their stats.
          strategy.make_ops = [&comms, make = strategy.make_ops](
                                  const ModelConfig& c, parallel::ParallelGroups& g,
                                  const parallel::TokenLayout& layout, ModelTensors& params,
                                  ModelTensors& grads, MemoryTracker& t) {
            auto ops = make(c, g, layout, params, grads, t);
            if (auto* tsp = dynamic_cast<parallel::TspOps*>(ops.get())) {
              comms.push_back(tsp->shard_comm());
              comms.push_back(tsp->grad_comm());
            }
            return ops;
          };
          parallel::RankModel model(m, groups, o.seq, o.recompute, tracker, o.seed,
                                    std::move(strategy), o.precision);
          AdamW optimizer(model.params(), tracker, {});
          // The rank's share of the global batch: its data-parallel replica's sequences.
          const std::int64_t per = o.batch / groups.dp().size();
          const std::size_t first = static_cast<std::size_t>(groups.dp().rank() * per * o.seq);
          const std::vector<parallel::LocalBatch> micro(
              static_cast<std::size_t>(o.micro_batches),
              model.localize(TokenBatch{per, o.seq, ids.data() + first, labels.data() + first}));
          for (int s = 0; s < o.warmup; ++s)
            parallel::parallel_train_step(model, optimizer, micro, 1e-4f, 1.0);
          if (o.warmup > 0) tracker.reset_peaks();
          for (comm::Communicator& c : comms) c.reset_stats();
          world.barrier();  // accounted under "barrier", left out below
          const double cpu0 = process_cpu_seconds();
          const auto t0 = std::chrono::steady_clock::now();
          double loss = 0;
          std::vector<double> each;
          auto t_prev = t0;
          RankFigures& mine = run.ranks[static_cast<std::size_t>(world.rank())];
          for (int s = 0; s < o.steps; ++s) {
            loss = parallel::parallel_train_step(model, optimizer, micro, 1e-4f, 1.0).loss;
            if (sc.plan.pp > 1) {
              mine.pipeline_s += model.pipeline_seconds();
              mine.pipeline_wait_s += model.pipeline_wait_seconds();
            }
            if (o.time_each) {
              world.barrier();
              const auto t = std::chrono::steady_clock::now();
              each.push_back(std::chrono::duration<double>(t - t_prev).count());
              t_prev = t;
            }
          }
          world.barrier();
          if (world.rank() == 0) {
            run.wall_s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            run.cpu_s = process_cpu_seconds() - cpu0;
            run.loss = loss;
            run.step_wall_s = std::move(each);
          }
          const MemoryStats ms = tracker.stats();
          mine.peak = ms.peak;
          mine.peak_total = ms.peak_total;
          for (const comm::Communicator& c : comms)
            for (const auto& [kind, op] : c.stats().ops)
              if (kind != "barrier") mine.ops[kind] += op;
        },
        ro);
    run.ok = true;
  } catch (const OutOfBudget& e) {
    run.error = e.what();
  }
  // The tensors keep freed memory in the heap (core/tensor.cpp): hand it back between runs,
  // or a search's many probes hold every rank thread's arena at its peak at once.
  malloc_trim(0);
  return run;
}

// The largest value over ranks of each figure (the rank-max row of the CSV).
struct RankMax {
  std::array<std::int64_t, kNumMemCategories> peak{};
  std::int64_t peak_total = 0, peak_total_min = 0;
  std::map<std::string, comm::OpStats> ops;  // each field the max over ranks
  comm::OpStats total;                       // each field the max over ranks of the rank's sum
};

inline RankMax rank_max(const StepRun& run) {
  RankMax r;
  r.peak_total_min = run.ranks.empty() ? 0 : run.ranks.front().peak_total;
  auto fold = [](comm::OpStats& a, const comm::OpStats& b) {
    a.calls = std::max(a.calls, b.calls);
    a.messages_sent = std::max(a.messages_sent, b.messages_sent);
    a.messages_received = std::max(a.messages_received, b.messages_received);
    a.bytes_sent = std::max(a.bytes_sent, b.bytes_sent);
    a.bytes_received = std::max(a.bytes_received, b.bytes_received);
    a.time_s = std::max(a.time_s, b.time_s);
    a.exposed_s = std::max(a.exposed_s, b.exposed_s);
  };
  for (const RankFigures& f : run.ranks) {
    for (std::size_t c = 0; c < f.peak.size(); ++c) r.peak[c] = std::max(r.peak[c], f.peak[c]);
    r.peak_total = std::max(r.peak_total, f.peak_total);
    r.peak_total_min = std::min(r.peak_total_min, f.peak_total);
    comm::OpStats sum;
    for (const auto& [kind, op] : f.ops) {
      fold(r.ops[kind], op);
      sum += op;
    }
    fold(r.total, sum);
  }
  return r;
}

}  // namespace origami::bench
