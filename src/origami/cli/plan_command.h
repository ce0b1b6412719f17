// `origami plan`: for a model, sequence length, device count and hardware, every layout
// (strategy x mesh factorisation x DP) with its per-device memory by category, whether it
// fits, communication per step, predicted step time and cluster tokens/s, sorted, the
// recommendation marked; the longest sequence each strategy fits; inference rows (memory checked, times not).
// Closed form only (src/origami/plan/): no engine code runs.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace origami::cli {

class PlanCommand {
 public:
  explicit PlanCommand(CLI::App& app);
  bool selected() const { return command_->parsed(); }
  int run();

 private:
  CLI::App* command_;
  std::string preset_ = "small";
  std::string config_path_;
  std::int64_t seq_ = 0;
  int world_ = 1;
  std::optional<int> devices_per_node_;
  std::int64_t batch_ = 1;
  std::int64_t grad_accum_ = 1;
  std::int64_t global_batch_ = 0;  // 0: not given (the micro-batch is fixed instead)
  std::string recompute_ = "none";
  std::string tsp_schedules_ = "broadcast-ring";  // comma list: TSP rows per schedule
  std::string pp_ = "auto";         // --pp: auto | all | comma list of pipeline degrees
  std::string documents_;           // --documents: lognormal:MEDIAN,SIGMA or a --data spec
  std::int64_t eos_id_ = -1;         // --eos-id: the documents of a flat .bin in --documents
  std::string layout_ = "zigzag";   // --layout of the sequence axis
  std::string precision_ = "fp32";
  std::string grad_reduce_dtype_ = "fp32";
  bool shard_optimizer_ = false;
  std::string hardware_ = "h100";
  std::string json_path_;  // "-": stdout
  std::string plot_path_;
  // Hardware overrides (unset: the preset's).
  std::optional<double> memory_gib_, peak_tflops_, achievable_, overhead_gib_;
  std::optional<double> intra_alpha_us_, intra_gbs_, inter_alpha_us_, inter_gbs_;
};

}  // namespace origami::cli
