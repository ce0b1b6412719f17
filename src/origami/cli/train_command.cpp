#include "origami/cli/train_command.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "origami/cli/dry_run_flags.h"
#include "origami/cli/machine_peak.h"
#include "origami/comm/mpi_launch.h"
#include "origami/core/error.h"
#include "origami/data/dataset.h"
#include "origami/dryrun/training.h"
#include "origami/kernels/simd.h"
#include "origami/parallel/balanced_layout.h"
#include "origami/parallel/pipeline_stages.h"
#include "origami/parallel/registry.h"
#include "origami/train/batch_size.h"
#include "origami/train/memory_check.h"
#include "origami/train/preemption.h"

namespace origami::cli {

std::int64_t parse_bytes(const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "kib" || unit == "k") scale = 1024.0;
  else if (unit == "mib" || unit == "m") scale = 1024.0 * 1024;
  else if (unit == "gib" || unit == "g") scale = 1024.0 * 1024 * 1024;
  if (used == 0 || scale == 0 || !(value > 0))
    throw ConfigError(fmt::format("cannot read '{}' as a size; write e.g. 512MiB or 2GiB", text));
  // Whole bytes within int64 (the cast of anything larger, or of inf, is undefined): 2^62 B
  // is beyond any machine, and a fraction of a byte is a typo.
  const double bytes = value * scale;
  if (!(bytes <= 0x1p62))
    throw ConfigError(fmt::format("size '{}' is beyond 4 EiB; write e.g. 512MiB or 2GiB", text));
  if (bytes != std::floor(bytes))
    throw ConfigError(fmt::format("size '{}' is not a whole number of bytes; write e.g. 512MiB "
                                  "or 2GiB",
                                  text));
  return static_cast<std::int64_t>(bytes);
}

TrainCommand::TrainCommand(CLI::App& app) {
  command_ = app.add_subcommand("train", "Train a model (one device or a parallel strategy)");
  TrainOptions& o = options_;
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  command_->add_option("--config", config_path_, "Hugging Face Llama config.json")
      ->check(CLI::ExistingFile);
  command_
      ->add_option("--model", preset_,
                   "built-in model preset (tiny, tiny-moe, small, 1b, 7b, 13b, 70b)")
      ->capture_default_str();
  moe_capacity_option_ = command_->add_option(
      "--moe-capacity-factor", moe_capacity_factor_,
      "mixture of experts: each expert takes at most ceil(factor x tokens x k / E) of a "
      "micro-batch's assignments, the rest dropped and counted (> 0; default: dropless)");
  command_->add_option("--data", o.data_path,
                       "PATH[:WEIGHT][,PATH[:WEIGHT]...]: Origami token file prefixes, Megatron "
                       ".bin/.idx prefixes, flat or llm.c .bin files, or text files (byte "
                       "tokens, or --tokenizer's), blended by weight (docs/data.md; default: the "
                       "built-in corpus)");
  command_->add_option("--data-dtype", o.data_dtype,
                       "ids of a flat .bin without a header: uint16 (nanoGPT) or uint32")
      ->capture_default_str();
  command_->add_option("--data-order", o.data_order,
                       "random (windows drawn anywhere, with replacement) or epoch (each "
                       "S-token window once per epoch, shuffled by the seed)")
      ->capture_default_str();
  command_->add_flag("--document-masking", o.document_masking,
                     "rows of packed documents: attention and labels stop at each document's "
                     "end, RoPE positions restart at 0 in each (needs a document index: token "
                     "files, Megatron prefixes, or --eos-id for flat .bin files; "
                     "default off: unbroken causal rows; docs/data.md)");
  command_->add_option("--eos-id", o.eos_id,
                       "with --document-masking: the documents of flat or llm.c .bin files end "
                       "after each token of this id (the eos belongs to the document it ends); "
                       "token files and Megatron prefixes keep their own index");
  command_->add_option("--tokenizer", o.tokenizer_path,
                       "tokenizer of text data: tokenizer.json, SentencePiece .model, a folder "
                       "holding one, or \"byte\" (default); its vocabulary must fit the model's "
                       "vocab_size");
  command_->add_option("--seq", o.seq, "tokens per sequence")->capture_default_str();
  // The batch convention (train/batch_size.h): per data-parallel replica, as Megatron's.
  batch_option_ = command_
                      ->add_option("--batch,--micro-batch", o.batch,
                                   "sequences per micro-batch of EACH data-parallel replica "
                                   "(dry run: default 1); global batch = micro-batch x dp x "
                                   "grad-accum")
                      ->capture_default_str();
  grad_accum_option_ =
      command_->add_option("--grad-accum", o.grad_accum, "micro-batches per optimizer step")
          ->capture_default_str();
  command_->add_option("--global-batch", o.global_batch,
                       "sequences per optimizer step over all replicas (micro-batch x dp x "
                       "grad-accum): with --micro-batch, grad-accum is derived; else the "
                       "micro-batch (grad-accum stays); all three must agree");
  steps_option_ = command_->add_option("--steps", o.steps, "optimizer steps (dry run: default 1)")
                      ->capture_default_str();
  command_->add_option("--lr", o.lr, "peak learning rate")->capture_default_str();
  command_->add_option("--warmup", o.warmup, "linear warm-up steps, then cosine decay")
      ->capture_default_str();
  command_->add_option("--min-lr-ratio", o.min_lr_ratio, "final learning rate / peak")
      ->capture_default_str();
  command_->add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay (matrices)")
      ->capture_default_str();
  command_->add_option("--max-grad-norm", o.max_grad_norm, "global-norm clipping (0: off)")
      ->capture_default_str();
  command_->add_option("--seed", o.seed, "initialisation and data seed")->capture_default_str();
  command_->add_option("--threads", o.threads, "kernel threads")->capture_default_str();
  peak_gflops_option_ = command_->add_option(
      "--peak-gflops", peak_gflops_,
      "the peak MFU is stated against, in GFLOP/s for the whole run (default: oneDNN's sgemm "
      "rate on one core of this machine, measured once and cached, times --threads)");
  command_->add_option("--metrics", o.metrics_path, "write per-step metrics as JSON lines");
  command_->add_option("--memory-cap", memory_cap_, "refuse allocations beyond this (e.g. 2GiB)");
  command_->add_option("--log-every", o.log_every, "print every N steps")->capture_default_str();
  strategy_option_ = command_->add_option(
      "--strategy", o.strategy, parallel::strategy_help());
  degree_option_ = command_->add_option("--degree", o.degree, "ranks of the strategy's axis");
  command_->add_option("--mesh", o.mesh,
                       "axes instead of --degree, e.g. dp=2,tp=2 or tp=2,sp=2; pp=N in front "
                       "cuts the layers into N pipeline stages (pp=2,dp=2,tsp=2)");
  command_->add_option("--pp-layers", o.pp_layers,
                       "layers per pipeline stage, first to last, e.g. 3,5 (default: balanced; "
                       "the embedding on the first stage, the LM head on the last); with "
                       "--pp-virtual v, pp x v counts: layers per chunk, chunk c on stage c mod pp");
  command_->add_option("--pp-virtual", o.pp_virtual,
                       "model chunks per pipeline stage: 1 is 1F1B, v > 1 interleaved 1F1B "
                       "(bubble (pp-1)/(v m); --grad-accum m a multiple of pp)")
      ->capture_default_str();
  command_->add_flag("--tp-sequence-parallel", o.tp_sequence_parallel,
                     "TP with Megatron's sequence-parallel regions (as --strategy tpsp)");
  command_->add_option("--layout", o.layout, "token layout on the sequence axis: zigzag, contiguous, balanced "
                       "(with --document-masking: chunks by attention work)")
      ->capture_default_str();
  command_->add_option("--tsp-schedule", o.tsp_schedule,
                       "how TSP moves weights: broadcast-ring (attention shards broadcast, MLP "
                       "ring) or allgather (each block's whole weight all-gathered, its gradient "
                       "reduce-scattered; docs/tsp.md)")
      ->capture_default_str();
  command_->add_option("--moe-schedule", o.moe_schedule,
                       "how --strategy tsp runs a mixture of experts: ring (every expert sharded "
                       "1/D, the shards circulated, tokens stay) or expert (rank r owns E/D whole "
                       "experts, token rows sent to them and back by all-to-all; E divisible by "
                       "D; docs/moe.md)")
      ->capture_default_str();
  command_->add_option("--recompute", o.recompute, "none, mlp (gate/up recomputed) or full (each "
                       "layer's forward re-run in backward)")->capture_default_str();
  command_->add_flag("--shard-optimizer", o.shard_optimizer,
                     "split AdamW's state over the dp axis (ZeRO-1): gradients reduce-scattered, "
                     "each rank steps its slice, parameters all-gathered; no effect at dp 1 "
                     "(also for --dry-run)");
  command_->add_option("--backend", o.backend, "threads (in-process ranks) or mpi (under mpirun; "
                       "chosen automatically there)")->capture_default_str();
  // Checkpoints (docs/checkpoints.md).
  command_->add_option("--save-dir", o.checkpoint.save_dir,
                       "write sharded checkpoints DIR/step-N (and resume from the newest)");
  command_->add_option("--save-every", o.checkpoint.save_every,
                       "save after every N-th step (0: after the last one only)");
  command_->add_option("--resume", o.checkpoint.resume, "continue the run saved in this checkpoint");
  command_->add_option("--init-from", o.checkpoint.init_from,
                       "start from these parameters (a checkpoint or a Hugging Face folder)");
  // Dry run (docs/planner.md): the real schedule, nothing computed, virtual clocks.
  command_->add_flag("--dry-run", dry_run_,
                     "run without computing: memory accounted not allocated, kernels skipped, "
                     "transfers accounted, virtual step time (any model and sequence)");
  flops_rate_option_ =
      command_
          ->add_option("--flops-rate", flops_rate_gflops_,
                       "dry run: GFLOP/s of one rank (gemm and attention FLOPs)")
          ->capture_default_str();
  command_
      ->add_option("--precision", precision_,
                   "fp32 or bf16. A real run: bf16 mixed precision (fp32 master weights, "
                   "moments and gradients (see --grad-reduce-dtype), a bf16 copy of the weights for every linear, whose "
                   "shards TSP moves at half the bytes; K/V gathered and the saved activations "
                   "kept in bf16) under every layout, dense models. The dry run: element sizes "
                   "(bf16 weights/activations/communication, fp32 "
                   "master/gradients/moments/logits)")
      ->capture_default_str();
  command_
      ->add_option("--grad-reduce-dtype", grad_reduce_dtype_,
                   "fp32 or bf16 (with --precision bf16 only): the dtype the gradients are "
                   "held, accumulated over micro-batches and reduced in; bf16 holds 2 bytes per "
                   "parameter instead of 4 and halves the gradient reductions' bytes "
                   "(Megatron's grad-reduce-in-bf16)")
      ->capture_default_str();
  command_->add_option("--json", json_path_, "dry run: write the report as JSON to this file");
  // The link model: the dry run's clocks always use it; a real parallel run with --link-model
  // delays each message to alpha + bytes / beta (comm/link_model.h).
  command_->add_flag("--link-model", link_.enabled,
                     "real parallel run: delay each message to alpha + bytes/beta of its link "
                     "class (the flags below), to measure communication and overlap");
  link_options_ = add_link_flags(*command_, link_, "dry run or --link-model: ");
}

int TrainCommand::run_dry() {
  TrainOptions& o = options_;
  if (o.seq > o.model.max_position_embeddings) {
    // A long-context run of a preset: the model's position range (its RoPE tables) grows to
    // the sequence, as a long-context variant of the model would.
    std::cout << fmt::format("dry run: max_position_embeddings {} raised to --seq {}\n",
                             o.model.max_position_embeddings, o.seq);
    o.model.max_position_embeddings = o.seq;
  }
  parallel::ParallelConfig plan = parallel::make_parallel_config(
      o.strategy, o.degree, o.mesh, o.tp_sequence_parallel, parallel::parse_token_layout(o.layout));
  plan.tsp_schedule = parallel::parse_tsp_schedule(o.tsp_schedule);
  plan.moe_schedule = parallel::parse_moe_schedule(o.moe_schedule);
  plan.pp_layers = parallel::parse_pp_layers(o.pp_layers);
  plan.pp_virtual = o.pp_virtual;
  parallel::check_balanced_layout(plan, o.document_masking);
  if (!o.batch_fixed && o.global_batch == 0) o.batch = 1;  // one long sequence unless asked
  const std::string derived = resolve_global_batch(o, plan.dp);
  if (!derived.empty()) std::cout << "dry run: " << derived << "\n";
  DryRunOptions d;
  d.seq = o.seq;
  d.batch = o.batch;
  d.grad_accum = o.grad_accum;
  d.steps = steps_option_->count() > 0 ? o.steps : 1;
  d.recompute = o.recompute;
  d.shard_optimizer = o.shard_optimizer;
  d.precision = Precision::parse(precision_, grad_reduce_dtype_);
  if (!(flops_rate_gflops_ > 0))
    throw ConfigError(fmt::format("--flops-rate must be > 0 GFLOP/s, got {}", flops_rate_gflops_));
  d.flop_rate = flops_rate_gflops_ * 1e9;
  d.link = link_;
  d.seed = o.seed;
  d.memory_cap = o.memory_cap;  // --memory-cap: does the layout fit a device of this size?
  // Packed documents: the run's own rows, so that attention charges their masked work.
  std::optional<data::TokenDataset> rows;
  if (o.document_masking || o.eos_id >= 0) {  // (--eos-id alone: refused as train refuses it)
    data::DataOptions data_opts =
        data::data_options(o.data_dtype, o.data_order, o.tokenizer_path, o.model.vocab_size);
    data_opts.document_masking = o.document_masking;
    data_opts.eos_id = o.eos_id;
    rows.emplace(data::open_for_training(o.data_path, data_opts, o.model.vocab_size, o.seq));
    d.data = &*rows;
    std::cout << "dry run: rows of " << rows->describe() << "\n";
  }
  std::cout << fmt::format(
      "dry run: {} parameters, {} on {} simulated ranks, {} x {} tokens per replica x {} "
      "micro-batches, recompute {}, precision {}{}, {:.4g} GFLOP/s per rank, {}\n",
      o.model.num_parameters(), plan.describe(), plan.world(), d.batch, d.seq, d.grad_accum,
      d.recompute, d.precision.name,
      !d.shard_optimizer ? ""
      : plan.dp > 1      ? ", optimizer state sharded over dp"
                         : ", --shard-optimizer changes nothing at dp 1",
      flops_rate_gflops_, dry_run_links(link_));
  const DryRunReport r = dry_run(o.model, plan, d);
  std::cout << r.summary();
  if (!json_path_.empty()) write_json_file(json_path_, r.to_json());
  return 0;
}

int default_tsp_degree(const ModelConfig& m, std::int64_t seq, const std::string& layout) {
  if (comm::launched_by_mpirun()) {
    const char* n = std::getenv("OMPI_COMM_WORLD_SIZE");
    return n != nullptr ? std::max(1, std::atoi(n)) : 1;
  }
  const parallel::TokenLayoutKind kind = parallel::parse_token_layout(layout);
  for (int d = 4; d > 1; --d) {
    // The registry's rules (validate_plan), so that the default is never a degree the run then
    // refuses. The micro-batch constrains no TSP degree (only >= 1, checked with its own
    // message later): 1 here.
    try {
      parallel::validate_plan(parallel::make_parallel_config("tsp", d, "", false, kind), m, seq, 1,
                              d);
      return d;
    } catch (const ConfigError&) {  // NOLINT(bugprone-empty-catch): d refused, try d - 1
    }
  }
  return 1;
}

// --peak-gflops, or this machine's measured sgemm rate per core times the kernel threads; says
// which, with the SIMD target the kernels run on, before the run starts.
double TrainCommand::stated_peak_gflops() const {
  if (peak_gflops_option_->count() > 0) {
    if (!(peak_gflops_ > 0) || !std::isfinite(peak_gflops_))
      throw ConfigError(fmt::format("--peak-gflops must be a positive number of GFLOP/s (got {}); "
                                    "leave it out to measure this machine's",
                                    peak_gflops_));
    std::cout << fmt::format("origami: kernels on SIMD target {} ({}); MFU against "
                             "--peak-gflops {:.0f}\n",
                             kernels::simd_target(), cpu_model_name(), peak_gflops_);
    return peak_gflops_;
  }
  const MachinePeak p = machine_peak();
  std::cout << fmt::format("origami: kernels on SIMD target {} ({}); MFU against oneDNN sgemm's "
                           "{:.0f} GFLOP/s per thread ({}) x {} threads\n",
                           kernels::simd_target(), p.cpu, p.gflops_per_thread, p.source,
                           options_.threads);
  return p.gflops_per_thread * options_.threads;
}

int TrainCommand::run() {
  std::vector<std::string> warnings;
  options_.model = config_path_.empty() ? model_preset(preset_)
                                        : load_model_config(config_path_, &warnings);
  for (const std::string& w : warnings) std::cerr << "origami: warning: " << w << "\n";
  if (moe_capacity_option_->count() > 0) {
    if (!(moe_capacity_factor_ > 0) || !std::isfinite(moe_capacity_factor_))
      throw ConfigError(fmt::format("--moe-capacity-factor is {}; it must be a finite number > 0 "
                                    "(e.g. 1.25), or absent: dropless",
                                    moe_capacity_factor_));
    if (!options_.model.is_moe())
      throw ConfigError("--moe-capacity-factor applies to a mixture-of-experts model "
                        "(num_local_experts in config.json, or --model tiny-moe); this one is "
                        "dense: drop the flag");
    options_.model.moe_capacity_factor = moe_capacity_factor_;
  }
  if (!memory_cap_.empty()) options_.memory_cap = parse_bytes(memory_cap_);
  options_.batch_fixed = batch_option_->count() > 0;
  options_.grad_accum_fixed = grad_accum_option_->count() > 0;
  if (strategy_option_->count() == 0 && degree_option_->count() == 0 && options_.mesh.empty() &&
      !options_.tp_sequence_parallel) {
    options_.strategy = "tsp";
    options_.degree = default_tsp_degree(options_.model, options_.seq, options_.layout);
  }
  // "--mesh dp=2,tsp=2" (the README's example) alone: the mesh says which strategy.
  if (strategy_option_->count() == 0 && !options_.mesh.empty())
    options_.strategy = parallel::strategy_of_mesh(options_.mesh);
  if (dry_run_) {
    if (link_.enabled)
      throw ConfigError("--link-model is for a real run: --dry-run always applies the link flags");
    return run_dry();
  }
  if (!json_path_.empty()) throw ConfigError("--json belongs to --dry-run");
  Precision::parse(precision_, grad_reduce_dtype_);  // a bad name exits 2 here, before any work
  options_.precision = precision_;
  options_.grad_reduce_dtype = grad_reduce_dtype_;
  if (flops_rate_option_->count() > 0)
    throw ConfigError("--flops-rate is the dry run's rate (add --dry-run); a real run measures "
                      "its speed (--peak-gflops sets the peak its MFU is stated against)");
  if (!link_.enabled)
    for (const CLI::Option* l : link_options_)
      if (l->count() > 0)
        throw ConfigError(fmt::format("{} sets the link model of --dry-run or --link-model: add "
                                      "one of them",
                                      l->get_name()));
  if (link_.enabled) link_.validate();
  options_.link = link_;
  options_.peak_gflops = stated_peak_gflops();
  install_stop_signals();  // SIGTERM, SIGINT, SIGUSR1: finish the step, save, exit 75
  train(options_, [](const std::string& line) { std::cout << line << std::endl; });
  return 0;
}

}  // namespace origami::cli
