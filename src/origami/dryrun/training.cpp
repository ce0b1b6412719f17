#include "origami/dryrun/training.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "origami/core/dry_run.h"
#include "origami/data/dataset.h"
#include "origami/dryrun/host_memory.h"
#include "origami/dryrun/rank_figures.h"
#include "origami/dryrun/ranks.h"
#include "origami/kernels/cross_entropy.h"
#include "origami/model/optimizer.h"
#include "origami/parallel/rank_model.h"
#include "origami/train/rank_step.h"

namespace origami {

namespace {

// Deterministic token ids (the data does not matter to the schedule, only its shape; the
// labels are all unmasked so every rank's count is real): `rows` sequences from row `first` of
// micro-batch `step` of the job's B sequences (each replica's micro-batch is its rows of it).
void synthetic_rows(std::int64_t B, std::int64_t first, std::int64_t rows, std::int64_t S,
                    std::int64_t vocab, std::uint64_t seed, std::int64_t step, std::int32_t* ids,
                    std::int32_t* labels) {
  for (std::int64_t i = 0; i < rows * S; ++i) {
    const std::uint64_t x =
        seed * 0x9E3779B97F4A7C15ull +
        static_cast<std::uint64_t>(step * B * S + first * S + i) * 7919u;
    ids[i] = static_cast<std::int32_t>(x % static_cast<std::uint64_t>(vocab));
    labels[i] = static_cast<std::int32_t>((x + 7919u) % static_cast<std::uint64_t>(vocab));
  }
}

void run_rank(const ModelConfig& model, const parallel::ParallelConfig& plan,
              const DryRunOptions& o, comm::Communicator& world, const dryrun::Clock& clock,
              DryRunRank& out) {
  MemoryTracker& tracker = world.tracker();
  parallel::ParallelGroups groups(world, plan);
  parallel::RankModel rank_model(model, groups, o.seq, parse_recompute(o.recompute), tracker,
                                 o.seed);
  AdamW optimizer = parallel::make_rank_optimizer(
      rank_model, tracker,
      {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f},
      o.shard_optimizer);
  // o.batch is each data-parallel replica's micro-batch: replica p reads rows
  // [p * batch, (p + 1) * batch) of the job's micro-batch of batch x dp sequences.
  const int P = groups.dp().size(), p = groups.dp().rank();
  const std::int64_t job = o.batch * P;
  for (std::int64_t step = 1; step <= o.steps; ++step) {
    const double start = clock.now_s;
    std::vector<parallel::LocalBatch> micro;
    for (std::int64_t m = 0; m < o.grad_accum; ++m) {
      const std::int64_t index = (step - 1) * o.grad_accum + m;
      if (o.data != nullptr) {  // the trainer's rows of the run's data (train/train_loop.cpp)
        const data::Batch b =
            o.data->rows(o.seed, index, job, p * o.batch, o.batch, o.seq, tracker);
        micro.push_back(rank_model.localize(
            {o.batch, o.seq, b.input_ids.data<std::int32_t>(), b.labels.data<std::int32_t>(),
             b.documents.defined() ? b.documents.data<std::int32_t>() : nullptr,
             b.positions.defined() ? b.positions.data<std::int64_t>() : nullptr}));
        continue;
      }
      // As the trainer's prefetcher: the replica's rows only, in the tracker's workspace.
      Tensor ids(tracker, MemCategory::Workspace, DType::I32, {o.batch, o.seq});
      Tensor labels(tracker, MemCategory::Workspace, DType::I32, {o.batch, o.seq});
      synthetic_rows(job, p * o.batch, o.batch, o.seq, model.vocab_size, o.seed,
                     index, ids.data<std::int32_t>(),
                     labels.data<std::int32_t>());
      const TokenBatch mine{o.batch, o.seq, ids.data<std::int32_t>(),
                            labels.data<std::int32_t>()};
      micro.push_back(rank_model.localize(mine));
    }
    parallel::parallel_train_step(rank_model, optimizer, micro, 1e-3f, 1.0);
    out.step_s = clock.now_s - start;
  }
  fill_rank_figures(tracker.stats(), comm_by_name(world), clock, out);
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
  refuse_mixture_of_experts(model, "the dry run");  // its expected-routing model: not built
  parallel::validate_plan(plan, model, o.seq, o.batch, world);
  check_dry_run_host_memory(o.seq, o.batch, world);  // --seq 2^30: refused at once
  DryRunMachine machine{.precision = o.precision,
                        .flop_rate = o.flop_rate,
                        .memory_bw = o.memory_bw,
                        .link = o.link,
                        .memory_cap = o.memory_cap,
                        .execute = o.execute};
  machine.validate();
  std::vector<DryRunRank> ranks(static_cast<std::size_t>(world));
  run_dry_ranks(world, machine, [&](comm::Communicator& c, dryrun::Clock& clock) {
    run_rank(model, plan, o, c, clock, ranks[static_cast<std::size_t>(c.rank())]);
  });
  DryRunReport r;
  r.ranks = std::move(ranks);
  for (const DryRunRank& k : r.ranks) r.step_s = std::max(r.step_s, k.step_s);
  const double tokens = static_cast<double>(o.batch * plan.dp * o.seq * o.grad_accum);
  r.tokens_per_s = r.step_s > 0 ? tokens / r.step_s : 0.0;
  r.describe = plan.describe();
  return r;
}

std::string DryRunReport::summary() const {
  return rank_tables(ranks, "last step") +
         fmt::format("step time {:.6f} s (slowest rank), {:.0f} tokens/s\n", step_s, tokens_per_s);
}

std::string DryRunReport::to_json() const {
  nlohmann::json j;
  j["plan"] = describe;
  j["step_s"] = step_s;
  j["tokens_per_s"] = tokens_per_s;
  j["ranks"] = nlohmann::json::array();
  for (const DryRunRank& k : ranks) j["ranks"].push_back(rank_json(k));
  return j.dump(2);
}

}  // namespace origami
