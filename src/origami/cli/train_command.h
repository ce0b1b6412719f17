// `origami train`: flags, defaults and the run.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "origami/comm/link_model.h"
#include "origami/train/trainer.h"

namespace origami::cli {

class TrainCommand {
 public:
  explicit TrainCommand(CLI::App& app);
  bool selected() const { return command_->parsed(); }
  int run();

 private:
  CLI::App* command_;
  TrainOptions options_;
  std::string config_path_;
  std::string preset_ = "small";
  double moe_capacity_factor_ = 0;  // --moe-capacity-factor (ModelConfig::moe_capacity_factor)
  CLI::Option* moe_capacity_option_ = nullptr;
  std::string memory_cap_;
  // Whether the user chose a strategy (else TSP over 4 ranks is the default: see run()).
  CLI::Option* strategy_option_ = nullptr;
  CLI::Option* degree_option_ = nullptr;
  double peak_gflops_ = 0;
  CLI::Option* peak_gflops_option_ = nullptr;
  // The dry run (docs/planner.md "Dry run").
  bool dry_run_ = false;
  double flops_rate_gflops_ = 100000;  // per rank
  std::string precision_ = "fp32";
  std::string grad_reduce_dtype_ = "fp32";
  std::string json_path_;
  comm::LinkModel link_;  // the dry run's links; a real run's when --link-model
  CLI::Option* flops_rate_option_ = nullptr;
  std::vector<CLI::Option*> link_options_;
  CLI::Option* steps_option_ = nullptr;
  CLI::Option* batch_option_ = nullptr;
  CLI::Option* grad_accum_option_ = nullptr;
  int run_dry();
  double stated_peak_gflops() const;
};

// "512MiB", "2GiB", "1000000" -> bytes; ConfigError on anything else.
std::int64_t parse_bytes(const std::string& text);

// The degree of the default run, TSP over 4 in-process ranks (under mpirun: over the launched
// ranks): a model or sequence that cannot split 4 ways runs on the largest degree below that
// the registry accepts (parallel::validate_plan: it divides the heads and the MLP width, divides
// the kv heads or is a multiple of them, and the sequence splits in `layout`), else 1.
int default_tsp_degree(const ModelConfig& m, std::int64_t seq, const std::string& layout);

}  // namespace origami::cli
