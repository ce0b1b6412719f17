#include "origami/cli/plan_command.h"

#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "origami/core/error.h"
#include "origami/model/config.h"
#include "origami/plan/cost_model.h"

namespace origami::cli {

PlanCommand::PlanCommand(CLI::App& app) {
  command_ = app.add_subcommand(
      "plan", "Per-device memory, communication and FLOPs of every baseline layout (closed form)");
  command_->add_option("--model", preset_, "preset: " + fmt::format("{}", fmt::join(
                                                            model_preset_names(), ", ")));
  command_->add_option("--config", config_path_, "a Hugging Face Llama config.json instead");
  command_->add_option("--seq", seq_, "tokens per sequence")->required();
  command_->add_option("--devices", devices_, "devices (every dp x tp x sp factorisation)")
      ->required();
  command_->add_option("--batch", batch_, "sequences per micro-batch (split over dp)");
  command_->add_option("--recompute", recompute_, "none | mlp | full");
  command_->add_flag("--json", json_, "one JSON object per layout instead of the table");
}

namespace {

struct Row {
  plan::Mesh mesh;
  std::string error;  // why the layout is impossible (empty when it is feasible)
  plan::Memory memory;
  std::int64_t comm_bytes = 0;  // sent per rank per step: blocks + gradient reductions
  double flops = 0;             // per device per step
};

std::vector<plan::Mesh> meshes(int n) {
  std::vector<plan::Mesh> out;
  for (int dp = 1; dp <= n; ++dp)
    for (int tp = 1; dp * tp <= n; ++tp) {
      if (n % (dp * tp) != 0) continue;
      const int sp = n / (dp * tp);
      out.push_back({dp, tp, sp, false});
      if (tp > 1) out.push_back({dp, tp, sp, true});
    }
  return out;
}

std::string strategy_name(const plan::Mesh& m) {
  const std::string s = m.strategy() + (m.sequence_parallel && m.tp > 1 ? "(sp regions)" : "");
  return m.dp > 1 && s != "dp" ? "dp x " + s : s;
}

std::string gib(std::int64_t bytes) { return fmt::format("{:.3f}", double(bytes) / (1 << 30)); }

}  // namespace

int PlanCommand::run() {
  if (devices_ < 1) throw ConfigError(fmt::format("--devices must be >= 1 (got {})", devices_));
  std::vector<std::string> warnings;
  const ModelConfig model =
      config_path_.empty() ? model_preset(preset_) : load_model_config(config_path_, &warnings);
  for (const auto& w : warnings) std::cerr << "origami: warning: " << w << "\n";
  plan::Workload work;
  work.batch = batch_;
  work.seq = seq_;
  work.recompute = plan::parse_recompute(recompute_);

  std::vector<Row> rows;
  for (const plan::Mesh& mesh : meshes(devices_)) {
    Row r;
    r.mesh = mesh;
    try {
      r.memory = plan::memory_per_device(model, mesh, work);
      for (const auto& op : plan::comm_per_micro_batch(model, mesh, work)) r.comm_bytes += op.bytes_sent;
      for (const auto& op : plan::comm_gradient_reduction(model, mesh, work.elem))
        r.comm_bytes += op.bytes_sent;
      r.flops = plan::training_flops(model, batch_, seq_) / mesh.world();
    } catch (const ConfigError& e) {
      r.error = e.what();
    }
    rows.push_back(std::move(r));
  }

  if (json_) {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows) {
      nlohmann::json j{{"strategy", r.mesh.strategy()},
                       {"sequence_parallel", r.mesh.sequence_parallel && r.mesh.tp > 1},
                       {"mesh", {{"dp", r.mesh.dp}, {"tp", r.mesh.tp}, {"sp", r.mesh.sp}}},
                       {"feasible", r.error.empty()}};
      if (!r.error.empty()) {
        j["error"] = r.error;
      } else {
        j["bytes"] = {{"parameters", r.memory.parameters}, {"gradients", r.memory.gradients},
                      {"optimizer_state", r.memory.optimizer},
                      {"saved_activations", r.memory.activations}, {"logits", r.memory.logits},
                      {"total", r.memory.total()}};
        j["comm_bytes_sent_per_step"] = r.comm_bytes;
        j["flops_per_device_per_step"] = r.flops;
      }
      out.push_back(std::move(j));
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "model {} L={} h={} | seq {} x batch {} | {} devices | recompute {} | fp32 | "
      "comm buffers, workspace and runtime overhead not included\n",
      config_path_.empty() ? preset_ : config_path_, model.num_hidden_layers, model.hidden_size,
      seq_, batch_, devices_, recompute_);
  std::cout << fmt::format("{:<22} {:>3} {:>3} {:>3} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11} {:>10}\n",
                           "strategy", "dp", "tp", "sp", "params", "grads", "optim", "saved", "logits",
                           "total GiB", "comm MiB", "TFLOP/dev");
  for (const Row& r : rows) {
    const std::string head = fmt::format("{:<22} {:>3} {:>3} {:>3}", strategy_name(r.mesh),
                                         r.mesh.dp, r.mesh.tp, r.mesh.sp);
    if (!r.error.empty()) {
      std::cout << head << "  infeasible: " << r.error << "\n";
      continue;
    }
    std::cout << fmt::format("{} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11.2f} {:>10.3f}\n", head,
                             gib(r.memory.parameters), gib(r.memory.gradients),
                             gib(r.memory.optimizer), gib(r.memory.activations),
                             gib(r.memory.logits), gib(r.memory.total()),
                             double(r.comm_bytes) / (1 << 20), r.flops / 1e12);
  }
  return 0;
}

}  // namespace origami::cli
