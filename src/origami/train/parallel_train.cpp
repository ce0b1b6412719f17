#include "origami/train/parallel_train.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "origami/comm/mpi_transport.h"
#include "origami/comm/run_ranks.h"
#include "origami/kernels/simd.h"
#include "origami/kernels/threads.h"
#include "origami/parallel/rank_model.h"
#include "origami/train/checkpoint_loop.h"
#include "origami/train/parallel_train_reference.h"
#include "origami/train/memory_check.h"
#include "origami/train/preemption.h"
#include "origami/train/rank_consistency.h"

namespace origami {

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr;
}

namespace {

struct Shared {
  const TrainOptions* options;
  const data::TokenDataset* dataset;
  parallel::ParallelConfig plan;
  std::function<void(const std::string&)> log;
  int kernel_threads = 1;
  std::mutex mutex;
  TrainResult result;
  std::string stopped;  // a rank's Preempted message
};

MemoryStats to_stats(const std::vector<std::int64_t>& v) {
  MemoryStats s;
  for (int c = 0; c < kNumMemCategories; ++c)
    s.peak[static_cast<std::size_t>(c)] = v[static_cast<std::size_t>(c)];
  s.peak_total = v[kNumMemCategories];
  return s;
}

std::string rank_memory_report(const std::vector<MemoryStats>& ranks) {
  // One column per category, as wide as its name.
  // (Training holds no KV cache: that inference-only column is left out.)
  const auto shown = [](int c) { return static_cast<MemCategory>(c) != MemCategory::KvCache; };
  std::vector<std::size_t> width;
  std::string out = "rank";
  for (int c = 0; c < kNumMemCategories; ++c) {
    const std::string_view name = mem_category_name(static_cast<MemCategory>(c));
    width.push_back(std::max<std::size_t>(12, name.size() + 2));
    if (shown(c)) out += fmt::format("{:>{}}", name, width.back());
  }
  out += fmt::format("{:>14}\n", "peak total");
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    out += fmt::format("{:<4}", r);
    for (int c = 0; c < kNumMemCategories; ++c)
      if (shown(c))
        out += fmt::format("{:>{}}", format_bytes(ranks[r].peak[static_cast<std::size_t>(c)]),
                           width[static_cast<std::size_t>(c)]);
    out += fmt::format("{:>14}\n", format_bytes(ranks[r].peak_total));
  }
  return out;
}

// One rank's whole run.
void run_rank(Shared& sh, comm::Communicator& world) {
  const TrainOptions& o = *sh.options;
  kernels::set_thread_count(sh.kernel_threads);
  const bool lead = world.rank() == 0;
  auto log = [&](const std::string& line) {
    if (lead) sh.log(line);
  };
  check_ranks_agree(world, o, *sh.dataset);  // an MPMD launch may give ranks other flags
  const ckpt::SaveDirLock save_dir = ckpt::open_save_dir(o, &world, log);  // before any compute
  MemoryTracker& tracker = world.tracker();
  parallel::ParallelGroups groups(world, sh.plan);
  parallel::RankModel model(model_for_run(o.model, o.seq), groups, o.seq,
                            parse_recompute(o.recompute), tracker, o.seed);
  AdamW optimizer(model.params(), tracker,
                  {.lr = o.lr,
                   .beta1 = o.beta1,
                   .beta2 = o.beta2,
                   .eps = 1e-8f,
                   .weight_decay = o.weight_decay});
  // Every rank draws the same global batches and keeps its share: data parallel rank p takes
  // sequences [p*B/P, (p+1)*B/P) of each micro-batch, the layout its positions of them.
  const ckpt::RankState saved{&model.specs(), &model.params(), &optimizer};
  const std::int64_t done = ckpt::begin_run(o, &world, saved, log);
  data::BatchSampler sampler(*sh.dataset, o.seed, done * o.grad_accum);
  const int P = groups.dp().size(), p = groups.dp().rank();
  const std::int64_t per = o.batch / P;
  const double flops_per_step =
      training_flops(o.model, o.batch, o.seq) * static_cast<double>(o.grad_accum);
  std::ofstream metrics = open_metrics(lead ? o.metrics_path : std::string());
  log(fmt::format("model: {} parameters (h {}, {} layers, {} heads, {} kv heads, intermediate {}, "
                  "vocabulary {}); data: {} ({} tokens)",
                  o.model.num_parameters(), o.model.hidden_size, o.model.num_hidden_layers,
                  o.model.num_attention_heads, o.model.num_key_value_heads,
                  o.model.intermediate_size, o.model.vocab_size, sh.dataset->label(),
                  sh.dataset->size()));
  log(fmt::format("run: {} steps of {} x {} sequences of {} tokens, {} kernel threads per rank",
                  o.steps, o.grad_accum, o.batch, o.seq, sh.kernel_threads));
  log(fmt::format("parallel: {} on {} ranks ({}), recompute {}", sh.plan.describe(), world.size(),
                  world.transport().name(), o.recompute));
  if (o.link.enabled) log(o.link.describe());
  for (std::int64_t step = done + 1; step <= o.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<parallel::LocalBatch> micro;
    for (std::int64_t m = 0; m < o.grad_accum; ++m) {
      const data::Batch b = sampler.next_batch(o.batch, o.seq, tracker);
      const TokenBatch mine{per, o.seq, b.input_ids.data<std::int32_t>() + p * per * o.seq,
                            b.labels.data<std::int32_t>() + p * per * o.seq};
      micro.push_back(model.localize(mine));
    }
    const float lr = learning_rate(step, o.steps, o.warmup, o.lr, o.min_lr_ratio);
    const parallel::ParallelStepStats st =
        parallel::parallel_train_step(model, optimizer, micro, lr, o.max_grad_norm);
    StepStats s;
    s.step = step;
    s.loss = st.loss;
    s.tokens = o.batch * o.seq * o.grad_accum;
    s.grad_norm = st.grad_norm;
    s.clip_coefficient = st.clip_coefficient;
    s.lr = lr;
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double tokens_per_s = static_cast<double>(s.tokens) / s.seconds;
    const double gflops = flops_per_step / s.seconds / 1e9;
    if (metrics.is_open()) {
      nlohmann::json j = {{"step", s.step},
                          {"loss", s.loss},
                          {"lr", s.lr},
                          {"grad_norm", s.grad_norm},
                          {"tokens", s.tokens},
                          {"seconds", s.seconds},
                          {"tokens_per_s", tokens_per_s},
                          {"gflops", gflops},
                          {"mfu", gflops / o.peak_gflops},
                          {"simd", kernels::simd_target()},
                          {"peak_bytes", tracker.peak_total()}};
      metrics << j.dump() << "\n";
    }
    if (step == 1 || step % o.log_every == 0 || step == o.steps) {
      log(fmt::format(
          "step {:>5}  loss {:.4f}  lr {:.2e}  grad norm {:.3f}  {:>8.0f} tokens/s  "
          "{:>6.1f} GFLOP/s  MFU {:.1f}%",
          step, s.loss, s.lr, s.grad_norm, tokens_per_s, gflops, 100.0 * gflops / o.peak_gflops));
    }
    if (lead) sh.result.steps.push_back(s);
    ckpt::after_step(o, &world, saved, step, sh.plan.describe(), log);
  }
  // Every rank's peaks, gathered to all (works on both transports).
  const MemoryStats mine = tracker.stats();
  std::vector<std::int64_t> v(mine.peak.begin(), mine.peak.end());
  v.push_back(mine.peak_total);
  std::vector<std::int64_t> all(v.size() * static_cast<std::size_t>(world.size()));
  world.all_gather(v, all);
  if (lead) {
    for (int r = 0; r < world.size(); ++r)
      sh.result.rank_memory.push_back(to_stats(std::vector<std::int64_t>(
          all.begin() + static_cast<std::ptrdiff_t>(r * v.size()),
          all.begin() + static_cast<std::ptrdiff_t>((r + 1) * v.size()))));
    sh.result.memory = mine;
    log("peak memory per rank by category:\n" + rank_memory_report(sh.result.rank_memory));
    if (sh.plan.tsp) {
      // Beside them, what one device needs for the same run (measured on its own tracker).
      const MemoryStats one = one_device_memory(o, *sh.dataset);
      std::string row = rank_memory_report({one});
      row = row.substr(row.find('\n') + 1);
      row.replace(0, 4, "1dev");  // the row is one device, not a rank
      log("one device, same model, batch and recompute (one forward+backward, measured):\n" + row);
    }
  }
}

// One rank's run. A stop (Preempted: thrown on every rank after the same step, saved) ends it
// normally — on MPI a finalize, not an abort — and is rethrown once every rank returned.
bool run_rank_or_stop(Shared& sh, comm::Communicator& world) {
  try {
    run_rank(sh, world);
    return false;
  } catch (const Preempted& p) {
    std::lock_guard lock(sh.mutex);
    sh.stopped = p.what();
    return true;
  }
}

}  // namespace

TrainResult train_parallel(const TrainOptions& o,
                           const std::function<void(const std::string&)>& log) {
  if (o.backend != "auto" && o.backend != "threads" && o.backend != "mpi")
    throw ConfigError(fmt::format("unknown --backend '{}'; use threads or mpi", o.backend));
  const bool mpi = launched_by_mpirun();
  if (o.backend == "mpi" && !mpi)
    throw ConfigError(
        "--backend mpi needs the program started by mpirun, e.g. "
        "mpirun -np 4 origami train --backend mpi ...");
  if (o.backend == "threads" && mpi)
    throw ConfigError(
        "--backend threads under mpirun: drop --backend (mpi is chosen) or run "
        "without mpirun");
  Shared sh;
  sh.options = &o;
  sh.log = log;
  sh.plan = parallel::make_parallel_config(o.strategy, o.degree, o.mesh, o.tp_sequence_parallel,
                                           parallel::parse_token_layout(o.layout));
  parse_recompute(o.recompute);
  const data::TokenDataset dataset =
      data::TokenDataset::load(o.data_path, o.tokenizer_path, o.model.vocab_size);
  dataset.check_vocab(o.model.vocab_size);
  if (dataset.size() < o.seq + 1)
    throw ConfigError(
        fmt::format("the data ({}) has {} tokens, fewer than --seq + 1 = {}; "
                    "use a shorter --seq or more data",
                    dataset.label(), dataset.size(), o.seq + 1));
  sh.dataset = &dataset;
  if (mpi) {
    sh.kernel_threads = o.threads;
    const int code = comm::mpi_main([&](comm::Communicator& world) {
      parallel::validate_plan(sh.plan, o.model, o.seq, o.batch, world.size());
      // Ranks started on this host share its memory.
      const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
      check_run_memory(o, sh.plan, local != nullptr ? std::max(1, std::atoi(local)) : 1);
      world.tracker().set_cap(o.memory_cap);
      return run_rank_or_stop(sh, world) ? kPreemptedExitCode : 0;
    }, o.link);
    if (code != 0 && code != kPreemptedExitCode) throw Error(fmt::format("the MPI run ended with code {}", code));
  } else {
    const int world = sh.plan.world();
    parallel::validate_plan(sh.plan, o.model, o.seq, o.batch, world);  // before any rank starts
    check_run_memory(o, sh.plan, world);  // every rank is a thread of this process
    sh.kernel_threads = std::max(1, o.threads / world);
    comm::RunOptions ro;
    ro.memory_cap = o.memory_cap;
    ro.link = o.link;
    comm::run_ranks(
        world, [&](comm::Communicator& c) { run_rank_or_stop(sh, c); }, ro);
  }
  if (!sh.stopped.empty()) throw Preempted(stop_signal(), sh.stopped);
  return std::move(sh.result);
}

}  // namespace origami
