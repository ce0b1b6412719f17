// The one training loop, for every layout ("single" is the degree-1 mesh) on either transport:
// in-process ranks (threads) or MPI processes launched by mpirun (chosen automatically when the
// program runs under mpirun). Every rank draws the same global batches from the same sampler
// and keeps its data-parallel share and its layout's rows of them, so a run equals the
// single-device run with the same seed up to rounding. The options, the dataset and the memory
// estimate are checked once, here, before any rank starts.
#include "origami/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "origami/comm/mpi_launch.h"
#include "origami/comm/mpi_transport.h"
#include "origami/comm/run_ranks.h"
#include "origami/data/prefetch.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/simd.h"
#include "origami/kernels/threads.h"
#include "origami/parallel/balanced_layout.h"
#include "origami/parallel/pipeline_schedule.h"
#include "origami/parallel/pipeline_stages.h"
#include "origami/parallel/rank_model.h"
#include "origami/parallel/registry.h"
#include "origami/parallel/training_precision.h"
#include "origami/train/batch_size.h"
#include "origami/train/checkpoint_loop.h"
#include "origami/train/parallel_train_reference.h"
#include "origami/train/memory_check.h"
#include "origami/train/preemption.h"
#include "origami/train/rank_consistency.h"
#include "origami/train/rank_step.h"

namespace origami {

namespace {

void check_options(const TrainOptions& o) {
  auto positive = [](std::int64_t v, const char* flag) {
    if (v < 1) throw ConfigError(fmt::format("{} must be at least 1 (got {})", flag, v));
  };
  positive(o.seq, "--seq");
  positive(o.batch, "--batch");
  positive(o.grad_accum, "--grad-accum");
  positive(o.steps, "--steps");
  positive(o.threads, "--threads");
  positive(o.log_every, "--log-every");  // a divisor of the step number
  if (o.warmup < 0) throw ConfigError(fmt::format("--warmup must be >= 0 (got {})", o.warmup));
  // The hyperparameters' ranges (NaN and inf fail every comparison): AdamW moves each weight
  // by about lr per step, so lr above 1 diverges at once, and lr x weight decay above 1 would
  // flip the sign of the weights.
  auto within = [](double v, double lo, double hi, bool lo_open, const char* flag) {
    if (!(std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi))
      throw ConfigError(fmt::format("{} must be a number in {}{}, {}] (got {})", flag,
                                    lo_open ? "(" : "[", lo, hi, v));
  };
  within(o.lr, 0, 1, true, "--lr");
  within(o.weight_decay, 0, 1, false, "--weight-decay");
  within(o.min_lr_ratio, 0, 1, false, "--min-lr-ratio");
  within(o.max_grad_norm, 0, 1e30, false, "--max-grad-norm");
  if (!(o.peak_gflops > 0))
    throw ConfigError(fmt::format("--peak-gflops must be positive (got {})", o.peak_gflops));
  if (o.seq > o.model.max_position_embeddings)
    throw ConfigError(fmt::format("--seq {} exceeds the model's max_position_embeddings {}; "
                                  "shorten --seq or raise max_position_embeddings in the config",
                                  o.seq, o.model.max_position_embeddings));
  validate(o.model);
}

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

// "1F1B" or "interleaved 1F1B (v chunks a rank)": the schedule of a pipeline run.
std::string pipeline_schedule_name(int virtual_stages) {
  return virtual_stages == 1 ? std::string("1F1B")
                             : fmt::format("interleaved 1F1B ({} chunks a rank)", virtual_stages);
}

// The chunk layout and the bubble formula of a pipeline run (m = --grad-accum micro-batches).
std::string pipeline_layout(const parallel::PipelineSplit& split, int micro) {
  const int p = split.stages, v = split.virtual_stages;
  std::string out = fmt::format("pipeline: {} stages, {} over {} micro-batches (--grad-accum)", p,
                                pipeline_schedule_name(v), micro);
  for (int s = 0; s < p; ++s) {
    out += fmt::format("\n  stage {}:", s);
    for (int k = 0; k < v; ++k) {
      const int c = split.chunk_of(s, k);
      const parallel::StageLayers& l = split.layers_of(s, k);
      out += fmt::format("{} layers {}..{}{}{}", k == 0 ? "" : ";", l.first, l.first + l.count - 1,
                         c == 0 ? " + embedding" : "",
                         c + 1 == split.chunk_count() ? " + final norm, LM head" : "");
    }
  }
  const std::string formula = v == 1 ? "(p-1)/m" : "(p-1)/(v m)";
  const std::string figures = v == 1 ? fmt::format("{}/{}", p - 1, micro)
                                     : fmt::format("{}/({}x{})", p - 1, v, micro);
  out += fmt::format("\n  bubble {} = {} = {:.3f} of the busy time ({:.1f}% of the step)", formula,
                     figures, parallel::pipeline_bubble_of_busy(p, v, micro),
                     100.0 * parallel::pipeline_bubble(p, v, micro));
  return out;
}

// The measured bubble beside the formula: each stage's time waiting for its neighbours as a
// fraction of its time in the pipeline, over the steps after the first (a stage's ranks
// averaged). `times`: every world rank's {seconds in the pipeline, of them waited}, in world
// order (pp outermost: stage s is ranks [s, s + 1) x world / pp).
std::string pipeline_bubble_report(const std::vector<double>& times, int stages,
                                   int virtual_stages, int micro) {
  const std::size_t per_stage = times.size() / 2 / static_cast<std::size_t>(stages);
  std::string out = fmt::format("pipeline bubble, measured (time waiting for the neighbours / "
                                "time in the pipeline; {} formula {} = {:.1f}%):",
                                pipeline_schedule_name(virtual_stages),
                                virtual_stages == 1 ? "(p-1)/(m+p-1)" : "(p-1)/(vm+p-1)",
                                100.0 * parallel::pipeline_bubble(stages, virtual_stages, micro));
  for (int s = 0; s < stages; ++s) {
    double total = 0, waited = 0;
    for (std::size_t r = s * per_stage; r < (s + 1) * per_stage; ++r) {
      total += times[2 * r];
      waited += times[2 * r + 1];
    }
    out += fmt::format("  stage {} {:.1f}%", s, total > 0 ? 100.0 * waited / total : 0.0);
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
                            parse_recompute(o.recompute), tracker, o.seed,
                            Precision::parse(o.precision, o.grad_reduce_dtype));
  AdamW optimizer = parallel::make_rank_optimizer(model, tracker,
                                                  {.lr = o.lr,
                                                   .beta1 = o.beta1,
                                                   .beta2 = o.beta2,
                                                   .eps = 1e-8f,
                                                   .weight_decay = o.weight_decay},
                                                  o.shard_optimizer);
  // Every rank reads its part of the same global batches, on a background thread: o.batch is
  // each data-parallel replica's micro-batch, so micro-batch m is the sampler's batch of
  // B x P sequences (what one device running B x P sequences per micro-batch reads) and
  // replica p reads its sequences [p*B, (p+1)*B); the layout keeps its positions of them.
  const ckpt::RankState saved{&model.specs(), &model.params(), &optimizer};
  const std::int64_t done = ckpt::begin_run(o, &world, saved, log);
  model.refresh_compute_weights();  // bf16: a loaded master's compute copy
  const int P = groups.dp().size(), p = groups.dp().rank();
  const std::int64_t job_batch = o.batch * P;  // sequences per micro-batch over all replicas
  data::BatchPrefetcher batches(*sh.dataset, o.seed,
                                {.batch = job_batch, .seq = o.seq, .per_step = o.grad_accum,
                                 .first_row = p * o.batch, .rows = o.batch},
                                done + 1, o.steps, tracker);
  const double flops_per_step =
      training_flops(o.model, job_batch, o.seq) * static_cast<double>(o.grad_accum);
  std::ofstream metrics = open_metrics(lead ? o.metrics_path : std::string());
  log(fmt::format("model: {} parameters (h {}, {} layers, {} heads, {} kv heads, intermediate {}, "
                  "vocabulary {}); data: {}",
                  o.model.num_parameters(), o.model.hidden_size, o.model.num_hidden_layers,
                  o.model.num_attention_heads, o.model.num_key_value_heads,
                  o.model.intermediate_size, o.model.vocab_size, sh.dataset->describe()));
  log(fmt::format("run: {} steps of global batch {} ({} x micro-batch {} per replica x dp {}) "
                  "sequences of {} tokens, {} kernel threads per rank; MFU against a stated peak "
                  "of {:.0f} GFLOP/s",
                  o.steps, o.global_batch, o.grad_accum, o.batch, P, o.seq, sh.kernel_threads,
                  o.peak_gflops));
  if (world.size() == 1)
    log(fmt::format("layout: one device ({}), recompute {}", world.transport().name(),
                    o.recompute));
  else
    log(fmt::format("parallel: {} on {} ranks ({}), recompute {}", sh.plan.describe(),
                    world.size(), world.transport().name(), o.recompute));
  if (o.link.enabled) log(o.link.describe());
  if (model.computes_in_bf16())
    log("precision: bf16 compute copy of the matrices for every linear (" +
        kernels::linear_forward_bf16_path() +
        "), counted as parameters; fp32 master weights counted with AdamW's moments as "
        "optimizer state; K/V and the saved activations in bf16; " +
        (model.reduces_gradients_in_bf16()
             ? std::string("bf16 gradients (each layer's staged in fp32 for its backward, "
                           "reduced in bf16); fp32 norms ")
             : std::string("fp32 gradients, norms ")) +
        "and their statistics, the residual stream and loss");
  if (o.shard_optimizer)
    log(optimizer.sharded()
            ? fmt::format("optimizer: AdamW state sharded over dp {} (this rank's moments: {} "
                          "of {} elements)",
                          P, optimizer.slices().elements(),
                          optimizer_slices(model.params(), 1, 0).elements())
            : std::string("optimizer: --shard-optimizer changes nothing at dp 1 (no data "
                          "parallelism to shard over): the AdamW state is whole"));
  if (sh.plan.pp > 1) log(pipeline_layout(model.stages(), static_cast<int>(o.grad_accum)));
  std::vector<double> pipeline_times{0, 0};  // seconds in the pipeline, of them waited
  for (std::int64_t step = done + 1; step <= o.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<parallel::LocalBatch> micro;
    const data::BatchPrefetcher::Step mine = batches.next();
    for (const data::Batch& b : mine.micro)
      micro.push_back(model.localize(
          {o.batch, o.seq, b.input_ids.data<std::int32_t>(), b.labels.data<std::int32_t>(),
           b.documents.defined() ? b.documents.data<std::int32_t>() : nullptr,
           b.positions.defined() ? b.positions.data<std::int64_t>() : nullptr}));
    const float lr = learning_rate(step, o.steps, o.warmup, o.lr, o.min_lr_ratio);
    const parallel::ParallelStepStats st =
        parallel::parallel_train_step(model, optimizer, micro, lr, o.max_grad_norm);
    if (sh.plan.pp > 1 && (step > done + 1 || o.steps == done + 1)) {  // the first step warms up
      pipeline_times[0] += model.pipeline_seconds();
      pipeline_times[1] += model.pipeline_wait_seconds();
    }
    StepStats s;
    s.step = step;
    s.loss = st.loss;
    s.tokens = o.global_batch * o.seq;
    s.grad_norm = st.grad_norm;
    s.clip_coefficient = st.clip_coefficient;
    s.lr = lr;
    s.data_wait_seconds = mine.wait_seconds;
    s.moe = st.moe;
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
                          {"peak_bytes", tracker.peak_total()},
                          {"data_wait_s", s.data_wait_seconds}};
      if (o.model.is_moe()) {  // docs/moe.md "Load metrics"
        j["moe_tokens_per_expert"] = s.moe.tokens_per_expert;
        j["moe_imbalance"] = s.moe.imbalance();
        j["moe_dropped"] = s.moe.dropped;
      }
      metrics << j.dump() << "\n";
    }
    if (step == 1 || step % o.log_every == 0 || step == o.steps) {
      log(fmt::format(
          "step {:>5}  loss {:.4f}  lr {:.2e}  grad norm {:.3f}  {:>8.0f} tokens/s  "
          "{:>6.1f} GFLOP/s  MFU {:.1f}%  data wait {:.2f} ms",
          step, s.loss, s.lr, s.grad_norm, tokens_per_s, gflops, 100.0 * gflops / o.peak_gflops,
          1e3 * s.data_wait_seconds));
      if (o.model.is_moe())
        log(fmt::format("      experts: tokens {}  imbalance (max/mean) {:.3f}  dropped {}",
                        s.moe.tokens_per_expert, s.moe.imbalance(), s.moe.dropped));
    }
    if (lead) sh.result.steps.push_back(s);
    ckpt::after_step(o, &world, saved, step,
                     world.size() == 1 ? std::string("single") : sh.plan.describe(), log);
  }
  if (sh.plan.pp > 1) {
    std::vector<double> all(2 * static_cast<std::size_t>(world.size()));
    world.all_gather(pipeline_times, all);
    log(pipeline_bubble_report(all, sh.plan.pp, sh.plan.pp_virtual,
                               static_cast<int>(o.grad_accum)));
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
    if (sh.plan.is_tsp()) {
      // Beside them, what one device needs for the same run (measured on its own tracker).
      // One device running the same run takes every replica's micro-batch at once.
      TrainOptions whole = o;
      whole.batch = job_batch;
      const MemoryStats one = one_device_memory(whole, *sh.dataset);
      std::string row = rank_memory_report({one});
      row = row.substr(row.find('\n') + 1);
      row.replace(0, 4, "1dev");  // the row is one device, not a rank
      log("one device, same model, batch, recompute and precision (one forward+backward, "
          "measured):\n" + row);
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

// The run's batch sizes once the plan's dp is known: --global-batch resolved, and a resume
// under another dp keeping the saved global batch (batch_size.h); what was derived is logged.
// Every MPI rank reads the same checkpoint index, so all of them resolve alike.
void resolve_batch(TrainOptions& o, int dp, const std::function<void(const std::string&)>& log,
                   bool lead) {
  std::vector<std::string> notes = {resolve_global_batch(o, dp)};
  const CheckpointOptions& c = o.checkpoint;
  if (c.init_from.empty()) {
    const std::string dir = ckpt::find_resume(c, [](const std::string&) {});
    if (!dir.empty())
      notes.push_back(keep_saved_global_batch(o, dp, ckpt::read_index(dir).at("run"), dir));
  }
  for (const std::string& n : notes)
    if (lead && !n.empty()) log(n);
}

}  // namespace

TrainResult train(const TrainOptions& given, const std::function<void(const std::string&)>& log) {
  check_options(given);
  TrainOptions o = given;
  if (o.backend != "auto" && o.backend != "threads" && o.backend != "mpi")
    throw ConfigError(fmt::format("unknown --backend '{}'; use threads or mpi", o.backend));
  const bool mpi = comm::launched_by_mpirun();
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
  sh.plan.tsp_schedule = parallel::parse_tsp_schedule(o.tsp_schedule);
  sh.plan.moe_schedule = parallel::parse_moe_schedule(o.moe_schedule);
  sh.plan.pp_layers = parallel::parse_pp_layers(o.pp_layers);
  sh.plan.pp_virtual = o.pp_virtual;
  parallel::check_balanced_layout(sh.plan, o.document_masking);
  parallel::check_training_precision(Precision::parse(o.precision, o.grad_reduce_dtype), sh.plan, o.model);
  parse_recompute(o.recompute);
  if (o.link.enabled && sh.plan.world() == 1 && !mpi)
    throw ConfigError("--link-model needs a parallel run (one device sends nothing): choose "
                      "--strategy and --degree, or --mesh");
  data::DataOptions data_opts =
      data::data_options(o.data_dtype, o.data_order, o.tokenizer_path, o.model.vocab_size);
  data_opts.document_masking = o.document_masking;
  data_opts.eos_id = o.eos_id;
  const data::TokenDataset dataset =
      data::open_for_training(o.data_path, data_opts, o.model.vocab_size, o.seq);
  sh.dataset = &dataset;
  if (mpi) {
    sh.kernel_threads = o.threads;
    const int code = comm::mpi_main([&](comm::Communicator& world) {
      resolve_batch(o, sh.plan.dp, log, world.rank() == 0);
      parallel::validate_plan(sh.plan, o.model, o.seq, o.batch, world.size());
      parallel::check_pipeline_schedule(sh.plan.pp, sh.plan.pp_virtual,
                                        static_cast<int>(o.grad_accum));
      // Ranks started on this host share its memory.
      const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
      check_run_memory(o, sh.plan, local != nullptr ? std::max(1, std::atoi(local)) : 1);
      world.tracker().set_cap(o.memory_cap);
      return run_rank_or_stop(sh, world) ? kPreemptedExitCode : 0;
    }, o.link);
    if (code != 0 && code != kPreemptedExitCode) throw Error(fmt::format("the MPI run ended with code {}", code));
  } else {
    const int world = sh.plan.world();
    resolve_batch(o, sh.plan.dp, log, true);
    parallel::validate_plan(sh.plan, o.model, o.seq, o.batch, world);  // before any rank starts
    parallel::check_pipeline_schedule(sh.plan.pp, sh.plan.pp_virtual,
                                      static_cast<int>(o.grad_accum));
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
