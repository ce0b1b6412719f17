#include "origami/cli/plan_command.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "origami/cli/plan_plot.h"
#include "origami/core/error.h"
#include "origami/model/config.h"
#include "origami/plan/inference.h"
#include "origami/plan/layouts.h"

namespace origami::cli {

PlanCommand::PlanCommand(CLI::App& app) {
  command_ = app.add_subcommand(
      "plan",
      "Per-device memory, communication, step time and tokens/s of every layout (closed form)");
  command_->add_option("--model", preset_,
                       fmt::format("model preset: {}", fmt::join(model_preset_names(), ", ")));
  command_->add_option("--config", config_path_, "a Hugging Face Llama config.json instead");
  command_->add_option("--seq", seq_, "tokens per sequence")->required();
  command_->add_option("--world,--devices", world_,
                       "devices (every dp x tp x sp and dp x tsp factorisation)")
      ->required();
  command_->add_option("--micro-batch,--batch", batch_,
                       "sequences per micro-batch, the whole job's (split over dp)");
  command_->add_option("--devices-per-node", devices_per_node_,
                       "devices per node (default: the hardware preset's)");
  command_->add_option("--precision", precision_, "fp32 | bf16 (core/precision.h)");
  command_->add_option("--recompute", recompute_, "none | mlp | full");
  command_->add_option("--hardware", hardware_,
                       fmt::format("hardware preset: {}",
                                   fmt::join(plan::hardware_preset_names(), ", ")));
  command_->add_option("--json", json_path_,
                       "write the rows as JSON to FILE ('-' or no value: standard output)")
      ->expected(0, 1);
  command_->add_option("--plot", plot_path_,
                       "draw per-device memory against sequence length per strategy (PNG)");
  command_->add_option("--memory-gib", memory_gib_, "override: memory per device (GiB)");
  command_->add_option("--peak-tflops", peak_tflops_,
                       "override: peak TFLOP/s per device for the chosen precision");
  command_->add_option("--achievable", achievable_, "override: fraction of the peak reached");
  command_->add_option("--overhead-gib", overhead_gib_,
                       "override: runtime overhead per device (GiB; 0 for engine comparisons)");
  command_->add_option("--intra-alpha-us", intra_alpha_us_, "override: intra-node latency (us)");
  command_->add_option("--intra-gbs", intra_gbs_, "override: intra-node GB/s per device");
  command_->add_option("--inter-alpha-us", inter_alpha_us_, "override: inter-node latency (us)");
  command_->add_option("--inter-gbs", inter_gbs_, "override: inter-node GB/s per device");
}

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(std::int64_t bytes) { return fmt::format("{:.2f}", double(bytes) / kGiB); }

std::string strategy_label(const plan::Layout& l) {
  const std::string s = plan::family_name(l);
  return l.dp > 1 && s != "dp" ? "dp x " + s : s;
}

nlohmann::json row_json(const plan::PlanRow& r, std::int64_t layers) {
  const plan::Layout& l = r.layout;
  nlohmann::json j{{"strategy", l.json_strategy()},
                   {"sequence_parallel", l.sequence_parallel && l.tp > 1},
                   {"mesh", {{"dp", l.dp}, {"tp", l.tp}, {"sp", l.sp}, {"tsp", l.tsp}}},
                   {"feasible", r.error.empty()}};
  if (!r.error.empty()) {
    j["error"] = r.error;
    return j;
  }
  const plan::Prediction& p = r.prediction;
  const plan::Memory& m = p.memory;
  j["bytes"] = {{"parameters", m.parameters},
                {"gradients", m.gradients},
                {"optimizer_state", m.optimizer},
                {"saved_activations", m.activations},
                {"communication_buffers", m.comm_buffers},
                {"workspace", m.workspace},
                {"logits", m.logits},
                {"runtime_overhead", m.overhead},
                {"total", m.total()}};
  j["fits"] = p.fits;
  j["recommended"] = r.recommended;
  j["comm_bytes_sent_per_step"] = p.comm_bytes_per_step;
  j["comm_bytes_intra_node"] = p.intra_bytes;
  j["comm_bytes_inter_node"] = p.inter_bytes;
  nlohmann::json ops = nlohmann::json::array();
  for (const plan::CommCost& c : p.comm)
    ops.push_back({{"axis", c.op.axis},
                   {"op", c.op.op},
                   {"calls", c.op.calls},
                   {"bytes_sent", c.op.bytes_sent},
                   {"forward_calls", c.op.forward_calls},
                   {"forward_bytes", c.op.forward_bytes},
                   {"backward_bytes", c.gradient_reduction ? 0 : c.op.bytes_sent - c.op.forward_bytes},
                   {"per_layer_calls", c.op.layer_calls / layers},
                   {"per_layer_bytes", c.op.layer_bytes / layers},
                   {"gradient_reduction", c.gradient_reduction},
                   {"link", plan::link_class_name(c.link)},
                   {"seconds", c.seconds},
                   {"exposed_seconds", c.exposed_s}});
  j["comm"] = std::move(ops);
  j["flops_per_device_per_step"] = p.model_flops_per_device;
  j["executed_flops_per_device_per_step"] = p.executed_flops_per_device;
  j["compute_s"] = p.compute_s;
  j["comm_s"] = p.comm_s;
  j["exposed_comm_s"] = p.exposed_comm_s;
  j["step_s"] = p.step_s;
  j["tokens_per_s"] = p.tokens_per_s;
  j["max_seq"] = r.max_seq;
  return j;
}

}  // namespace

int PlanCommand::run() {
  if (world_ < 1) throw ConfigError(fmt::format("--world must be >= 1 (got {})", world_));
  if (seq_ < 1) throw ConfigError(fmt::format("--seq must be >= 1 (got {})", seq_));
  if (batch_ < 1) throw ConfigError(fmt::format("--micro-batch must be >= 1 (got {})", batch_));
  std::vector<std::string> warnings;
  const ModelConfig model =
      config_path_.empty() ? model_preset(preset_) : load_model_config(config_path_, &warnings);
  for (const auto& w : warnings) std::cerr << "origami: warning: " << w << "\n";
  const Precision precision = Precision::parse(precision_);
  plan::Hardware hw = plan::hardware_preset(hardware_);
  if (devices_per_node_) {
    if (*devices_per_node_ < 1)
      throw ConfigError(fmt::format("--devices-per-node must be >= 1 (got {})", *devices_per_node_));
    hw.devices_per_node = *devices_per_node_;
  }
  if (world_ > hw.devices_per_node && world_ % hw.devices_per_node != 0)
    throw ConfigError(fmt::format(
        "--world {} is not a whole number of nodes of {} devices; use a multiple of {} or set "
        "--devices-per-node",
        world_, hw.devices_per_node, hw.devices_per_node));
  if (memory_gib_) hw.memory_bytes = static_cast<std::int64_t>(*memory_gib_ * kGiB);
  if (peak_tflops_) (precision.name == "bf16" ? hw.peak_flops_bf16 : hw.peak_flops_fp32) = *peak_tflops_ * 1e12;
  if (achievable_) hw.achievable = *achievable_;
  if (overhead_gib_) hw.runtime_overhead_bytes = static_cast<std::int64_t>(*overhead_gib_ * kGiB);
  if (intra_alpha_us_) hw.intra.alpha_s = *intra_alpha_us_ * 1e-6;
  if (intra_gbs_) hw.intra.beta_Bps = *intra_gbs_ * 1e9;
  if (inter_alpha_us_) hw.inter.alpha_s = *inter_alpha_us_ * 1e-6;
  if (inter_gbs_) hw.inter.beta_Bps = *inter_gbs_ * 1e9;
  if (hw.achievable <= 0 || hw.intra.beta_Bps <= 0 || hw.inter.beta_Bps <= 0)
    throw ConfigError("--achievable, --intra-gbs and --inter-gbs must be > 0");

  plan::Workload work;
  work.batch = batch_;
  work.seq = seq_;
  work.recompute = plan::parse_recompute(recompute_);
  work.set_precision(precision);

  std::vector<plan::PlanRow> rows = plan::plan_rows(model, world_, work, hw);
  // The longest sequence each layout fits; per strategy family, the best of its layouts.
  std::map<std::string, std::pair<std::int64_t, plan::Layout>> longest;
  for (plan::PlanRow& r : rows) {
    r.max_seq = plan::longest_sequence(model, r.layout, work, hw).value_or(0);
    auto& best = longest[plan::family_name(r.layout)];
    if (r.max_seq > best.first) best = {r.max_seq, r.layout};
  }
  std::vector<plan::InferenceRow> inference;
  std::vector<std::string> inference_errors;
  for (int D = 1; D <= std::min(world_, hw.devices_per_node); D *= 2) {
    if (world_ % D != 0) continue;
    try {
      inference.push_back(plan::predict_inference(model, D, work, hw));
    } catch (const ConfigError& e) {
      inference_errors.push_back(fmt::format("tsp={}: {}", D, e.what()));
    }
  }

  const std::string source = config_path_.empty() ? preset_ : config_path_;
  const bool json = command_->count("--json") > 0;
  const bool json_stdout = json && (json_path_.empty() || json_path_ == "-");
  if (json) {
    nlohmann::json out{{"model", source},
                       {"seq", seq_},
                       {"micro_batch", batch_},
                       {"world", world_},
                       {"devices_per_node", hw.devices_per_node},
                       {"precision", precision.name},
                       {"recompute", recompute_},
                       {"hardware", hw.name},
                       {"memory_per_device", hw.memory_bytes}};
    nlohmann::json js = nlohmann::json::array();
    for (const plan::PlanRow& r : rows) js.push_back(row_json(r, model.num_hidden_layers));
    out["rows"] = std::move(js);
    nlohmann::json ls = nlohmann::json::object();
    for (const auto& [name, best] : longest)
      ls[name] = {{"max_seq", best.first},
                  {"mesh", {{"dp", best.second.dp}, {"tp", best.second.tp},
                            {"sp", best.second.sp}, {"tsp", best.second.tsp}}}};
    out["longest_sequence"] = std::move(ls);
    nlohmann::json inf = nlohmann::json::array();
    for (const plan::InferenceRow& r : inference)
      inf.push_back({{"strategy", "tsp"}, {"checked", false}, {"tsp", r.degree},
                     {"bytes", {{"parameters", r.parameters}, {"kv_cache", r.kv_cache},
                                {"communication_buffers", r.comm_buffers},
                                {"workspace", r.workspace}, {"logits", r.logits},
                                {"runtime_overhead", r.overhead}, {"total", r.total()}}},
                     {"fits", r.fits}, {"prefill_s", r.prefill_s},
                     {"prefill_bytes_sent", r.prefill_bytes},
                     {"decode_step_s", r.decode_token_s},
                     {"decode_bytes_sent_per_step", r.decode_bytes},
                     {"decode_tokens_per_s", r.decode_tokens_per_s}});
    out["inference"] = std::move(inf);
    if (json_stdout) {
      std::cout << out.dump(2) << "\n";
    } else {
      std::ofstream f(json_path_);
      if (!f) throw ConfigError(fmt::format("--json: cannot write '{}'", json_path_));
      f << out.dump(2) << "\n";
    }
  }
  if (!json_stdout) {
    std::cout << fmt::format(
        "model {} (L={} h={} heads {}/{} f={} V={}) | seq {} x micro-batch {} | {} devices, {} per "
        "node | {} | recompute {} | hardware {}: {} GiB/device, {:.1f} TFLOP/s achievable, "
        "runtime overhead {} GiB per device (included in total)\n",
        source, model.num_hidden_layers, model.hidden_size, model.num_attention_heads,
        model.num_key_value_heads, model.intermediate_size, model.vocab_size, seq_, batch_,
        world_, hw.devices_per_node, precision.name, recompute_, hw.name, gib(hw.memory_bytes),
        hw.flops_per_s(precision) / 1e12, gib(hw.runtime_overhead_bytes));
    std::cout << fmt::format(
        "  {:<16} {:>2} {:>2} {:>2} {:>3} | {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} | {:>8} "
        "{:>4} | {:>10} {:>10} | {:>9} {:>9} {:>11} | {:>8}\n",
        "strategy", "dp", "tp", "sp", "tsp", "params", "grads", "optim", "saved", "comm",
        "work", "logits", "totalGiB", "fits", "intraMiB", "interMiB", "step s", "exposed",
        "tokens/s", "max seq");
    for (const plan::PlanRow& r : rows) {
      const plan::Layout& l = r.layout;
      const std::string head = fmt::format("{} {:<16} {:>2} {:>2} {:>2} {:>3}",
                                           r.recommended ? "*" : " ", strategy_label(l), l.dp,
                                           l.tp, l.sp, l.tsp);
      if (!r.error.empty()) {
        std::cout << head << " | infeasible: " << r.error << "\n";
        continue;
      }
      const plan::Prediction& p = r.prediction;
      const plan::Memory& m = p.memory;
      std::cout << fmt::format(
          "{} | {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} | {:>8} {:>4} | {:>10.1f} {:>10.1f} | "
          "{:>9.3g} {:>9.3g} {:>11.4g} | {:>8}\n",
          head, gib(m.parameters), gib(m.gradients), gib(m.optimizer), gib(m.activations),
          gib(m.comm_buffers), gib(m.workspace), gib(m.logits), gib(m.total()),
          p.fits ? "yes" : "no", double(p.intra_bytes) / (1 << 20),
          double(p.inter_bytes) / (1 << 20), p.step_s, p.exposed_comm_s, p.tokens_per_s,
          r.max_seq);
    }
    std::cout << "longest sequence that fits (micro-batch " << batch_ << "):";
    for (const auto& [name, best] : longest)
      std::cout << (best.first > 0 ? fmt::format(" {} {} (dp {});", name, best.first, best.second.dp)
                                   : fmt::format(" {} none;", name));
    std::cout << "\ninference, TSP prefill of the prompt + decode with a head-sharded KV cache "
                 "(UNCHECKED: no engine to compare with yet):\n";
    for (const plan::InferenceRow& r : inference)
      std::cout << fmt::format(
          "  tsp {:>2}: params {} + KV cache {} + buffers {} + workspace {} + logits {} + "
          "overhead {} = {} GiB ({}), prefill {:.3g} s, decode {:.3g} s/step = {:.4g} tokens/s "
          "per replica\n",
          r.degree, gib(r.parameters), gib(r.kv_cache), gib(r.comm_buffers), gib(r.workspace),
          gib(r.logits), gib(r.overhead), gib(r.total()), r.fits ? "fits" : "does not fit",
          r.prefill_s, r.decode_token_s, r.decode_tokens_per_s);
    for (const auto& e : inference_errors) std::cout << "  " << e << "\n";
  }
  if (!plot_path_.empty()) plot_memory_vs_sequence(model, world_, work, hw, plot_path_);

  // Impossible requests: explain and exit 2 (the table above still shows why per row).
  const bool any_feasible =
      std::any_of(rows.begin(), rows.end(), [](const plan::PlanRow& r) { return r.error.empty(); });
  if (!any_feasible) {
    std::cerr << "origami plan: no layout of " << world_
              << " devices can run this model and sequence: every row above is refused (see "
                 "its reason); change --world, --seq or --micro-batch\n";
    return 2;
  }
  if (!rows.front().recommended) {
    std::int64_t best = 0;
    for (const auto& [name, b] : longest) best = std::max(best, b.first);
    std::cerr << "origami plan: sequence " << seq_ << " fits no layout of " << world_ << " x "
              << gib(hw.memory_bytes) << " GiB; "
              << (best > 0 ? fmt::format("the longest that fits is {} tokens", best)
                           : std::string("not even the shortest sequence fits"))
              << "; use more devices, --recompute full, --precision bf16 or a shorter --seq\n";
    return 2;
  }
  return 0;
}

}  // namespace origami::cli
