// `origami generate`: the flags of infer/generation.h (a checkpoint or a Hugging Face folder,
// its tokenizer, eos and stop strings; single device or TSP) and the printing: the streamed
// text, then prefill and decode tokens/s and every rank's peak memory by category.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "origami/comm/link_model.h"
#include "origami/infer/generation.h"

namespace origami::cli {

class GenerateCommand {
 public:
  explicit GenerateCommand(CLI::App& app);
  bool selected() const { return command_->parsed(); }
  int run();

 private:
  CLI::App* command_;
  infer::GenerateOptions options_;
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
