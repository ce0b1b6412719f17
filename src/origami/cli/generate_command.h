// `origami generate`: text from a trained model (a checkpoint or an exported Hugging Face
// folder), single device or TSP over D ranks (threads, or MPI under mpirun), with the byte
// tokenizer: the TSP prefill, the weight-stationary decode and sampling without gathering
// logits (infer/, docs/inference.md). Streams the text, then reports prefill and decode
// tokens/s and every rank's peak memory by category.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "origami/comm/link_model.h"
#include "origami/core/memory_tracker.h"
#include "origami/infer/sampling.h"

namespace origami::cli {

struct GenerateOptions {
  std::string checkpoint;   // a train/checkpoint folder (DIR/step-N)
  std::string model_dir;    // or a Hugging Face folder: config.json + model.safetensors
  std::string config_path;  // optional: the model the user expects (must match)
  std::vector<std::string> prompts;
  std::int64_t max_new_tokens = 32;
  infer::SamplingOptions sampling;
  std::string strategy = "single";  // single or tsp
  int degree = 0;                   // tsp ranks (0: 2, or the mpirun world)
  std::string layout = "zigzag";
  std::string backend = "auto";
  int threads = 1;
};

struct GenerateResult {
  std::vector<std::vector<std::int32_t>> tokens;  // generated ids per prompt
  std::int64_t prefill_tokens = 0, decode_tokens = 0;
  double prefill_s = 0, decode_s = 0;
  std::vector<MemoryStats> rank_memory;
};

// Checks everything (ConfigError naming the flag) before any rank starts, runs, and calls
// `stream(sequence, token)` on rank 0 as each token is drawn.
GenerateResult generate(const GenerateOptions& options,
                        const std::function<void(std::int64_t, std::int32_t)>& stream);

class GenerateCommand {
 public:
  explicit GenerateCommand(CLI::App& app);
  bool selected() const { return command_->parsed(); }
  int run();

 private:
  CLI::App* command_;
  GenerateOptions options_;
  std::vector<std::string> prompt_files_;
  // The dry run (docs/inference.md "Dry run"): no checkpoint, synthetic prompts.
  bool dry_run_ = false;
  std::string preset_;
  std::int64_t prompt_tokens_ = 4096;
  std::int64_t batch_ = 1;
  double flops_rate_gflops_ = 100000;  // per rank
  double memory_bw_gbps_ = 0;          // per rank, GB/s; 0: off
  std::string precision_ = "fp32";
  std::string json_path_;
  comm::LinkModel link_;
  std::vector<CLI::Option*> dry_options_;  // refused without --dry-run
  int run_dry();
};

}  // namespace origami::cli
