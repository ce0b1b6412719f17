#include "origami/cli/train_command.h"

#include <cstdlib>

#include "origami/train/parallel_train.h"

#include <algorithm>
#include <cctype>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "origami/core/error.h"

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
  return static_cast<std::int64_t>(value * scale);
}

TrainCommand::TrainCommand(CLI::App& app) {
  command_ = app.add_subcommand("train", "Train a model (one device or a parallel strategy)");
  TrainOptions& o = options_;
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  command_->add_option("--config", config_path_, "Hugging Face Llama config.json")
      ->check(CLI::ExistingFile);
  command_->add_option("--model", preset_, "built-in model preset (tiny, small, 1b, 7b, 13b, 70b)")
      ->capture_default_str();
  command_->add_option("--data", o.data_path,
                       "text file, byte-level tokens (default: the built-in corpus)");
  command_->add_option("--seq", o.seq, "tokens per sequence")->capture_default_str();
  command_->add_option("--batch", o.batch, "sequences per micro-batch")->capture_default_str();
  command_->add_option("--grad-accum", o.grad_accum, "micro-batches per optimizer step")
      ->capture_default_str();
  command_->add_option("--steps", o.steps, "optimizer steps")->capture_default_str();
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
  command_->add_option("--peak-gflops", peak_gflops_,
                       fmt::format("peak MFU is stated against (default {:.0f} per thread: the "
                                   "measured sgemm rate of one core here)",
                                   kCpuPeakGflopsPerThread));
  command_->add_option("--metrics", o.metrics_path, "write per-step metrics as JSON lines");
  command_->add_option("--memory-cap", memory_cap_, "refuse allocations beyond this (e.g. 2GiB)");
  command_->add_option("--log-every", o.log_every, "print every N steps")->capture_default_str();
  strategy_option_ = command_->add_option(
      "--strategy", o.strategy,
      "tsp (the default, over 4 ranks), single, dp, tp, tpsp, sp (or cp: context parallel)");
  degree_option_ = command_->add_option("--degree", o.degree, "ranks of the strategy's axis");
  command_->add_option("--mesh", o.mesh, "axes instead of --degree, e.g. dp=2,tp=2 or tp=2,sp=2");
  command_->add_flag("--tp-sequence-parallel", o.tp_sequence_parallel,
                     "TP with Megatron's sequence-parallel regions (as --strategy tpsp)");
  command_->add_option("--layout", o.layout, "token layout on the sequence axis: zigzag, contiguous")
      ->capture_default_str();
  command_->add_option("--recompute", o.recompute, "none, mlp (gate/up recomputed) or full (each "
                       "layer's forward re-run in backward)")->capture_default_str();
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
}

namespace {
// The default run is TSP over 4 in-process ranks (under mpirun: over the launched ranks);
// a model or sequence that cannot split 4 ways runs on the largest degree below that can.
int default_tsp_degree(const ModelConfig& m, std::int64_t seq, const std::string& layout) {
  if (launched_by_mpirun()) {
    const char* n = std::getenv("OMPI_COMM_WORLD_SIZE");
    return n != nullptr ? std::max(1, std::atoi(n)) : 1;
  }
  for (int d = 4; d > 1; --d) {
    const std::int64_t tokens = layout == "contiguous" ? d : 2 * d;
    if (m.num_attention_heads % d == 0 && m.num_key_value_heads % d == 0 &&
        m.intermediate_size % d == 0 && seq % tokens == 0)
      return d;
  }
  return 1;
}
}  // namespace

int TrainCommand::run() {
  std::vector<std::string> warnings;
  options_.model = config_path_.empty() ? model_preset(preset_)
                                        : load_model_config(config_path_, &warnings);
  for (const std::string& w : warnings) std::cerr << "origami: warning: " << w << "\n";
  options_.peak_gflops =
      peak_gflops_ > 0 ? peak_gflops_ : kCpuPeakGflopsPerThread * options_.threads;
  if (!memory_cap_.empty()) options_.memory_cap = parse_bytes(memory_cap_);
  if (strategy_option_->count() == 0 && degree_option_->count() == 0 && options_.mesh.empty() &&
      !options_.tp_sequence_parallel) {
    options_.strategy = "tsp";
    options_.degree = default_tsp_degree(options_.model, options_.seq, options_.layout);
  }
  train(options_, [](const std::string& line) { std::cout << line << std::endl; });
  return 0;
}

}  // namespace origami::cli
