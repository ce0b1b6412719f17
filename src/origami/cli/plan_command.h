// `origami plan`: the closed-form cost of every baseline layout of N devices for a model and
// sequence length (per-device memory by category, bytes sent per rank per step, FLOPs), as a
// table or JSON. No engine code runs: it answers for models no machine here could hold.
#pragma once

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
  int devices_ = 1;
  std::int64_t batch_ = 1;
  std::string recompute_ = "none";
  bool json_ = false;
};

}  // namespace origami::cli
