#include "origami/cli/plan_command.h"

#include "origami/plan/explain.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "origami/cli/plan_documents.h"
#include "origami/cli/plan_plot.h"
#include "origami/cli/plan_report.h"
#include "origami/core/error.h"
#include "origami/plan/limits.h"
#include "origami/model/config.h"
#include "origami/plan/inference.h"
#include "origami/plan/layouts.h"

namespace origami::cli {

PlanCommand::PlanCommand(CLI::App& app) {
  command_ = app.add_subcommand(
      "plan",
      "Per-device memory, communication, step time and tokens/s of every layout (closed form)");
  command_->add_option("--model", preset_,
                       fmt::format("model preset: {} (default small)",
                                   fmt::join(model_preset_names(), ", ")));
  command_->add_option("--config", config_path_, "a Hugging Face Llama config.json instead");
  command_->add_option("--seq", seq_, "tokens per sequence")->required();
  command_->add_option("--world,--devices", world_,
                       "devices (every dp x tp x sp and dp x tsp factorisation)")
      ->required();
  CLI::Option* micro = command_->add_option(
      "--micro-batch,--batch", batch_,
      "sequences per micro-batch of EACH data-parallel replica (default 1): "
      "global batch = micro-batch x dp x grad-accum");
  command_->add_option("--global-batch", global_batch_,
                       "sequences per optimizer step instead, fixed for every layout: each "
                       "row's replicas run global-batch / (dp x grad-accum) each (a row whose "
                       "dp x grad-accum does not divide it is refused)")
      ->excludes(micro);
  command_->add_option("--grad-accum", grad_accum_,
                       "micro-batches per optimizer step (default 1): the step time and "
                       "tokens/s count them, memory is one micro-batch's");
  command_->add_option("--devices-per-node", devices_per_node_,
                       "devices per node (default: the hardware preset's)");
  command_->add_option("--precision", precision_, "fp32 | bf16 (core/precision.h; default fp32)");
  command_->add_option("--grad-reduce-dtype", grad_reduce_dtype_,
                       "fp32 | bf16 (with --precision bf16): gradients held and reduced in "
                       "bf16, 2 bytes per parameter (default fp32)");
  command_->add_option("--recompute", recompute_, "none | mlp | full (default none)");
  command_->add_flag("--shard-optimizer", shard_optimizer_,
                     "AdamW's state split over dp (ZeRO-1, as train --shard-optimizer)");
  command_->add_option("--tsp-schedules", tsp_schedules_,
                       "TSP rows for each of these schedules, comma-separated: broadcast-ring "
                       "(default), allgather (e.g. broadcast-ring,allgather: both side by side)");
  command_->add_option("--pp", pp_,
                       "pipeline degrees to search: auto (default: every degree dividing the "
                       "world, up to the layers, when the world spans several nodes; none "
                       "within one node), all (those degrees always), or a comma list, e.g. "
                       "1,4 (1 alone: no pipeline rows); 1F1B over --grad-accum micro-batches, "
                       "balanced layers");
  command_->add_option(
      "--documents", documents_,
      "packed documents, as `train --document-masking` trains them (implied): "
      "lognormal:MEDIAN,SIGMA (document lengths in tokens, e.g. lognormal:1024,1.2) or a "
      "--data spec of token files with a document index (the user's own lengths); each row "
      "then counts the masked attention FLOPs and, where the sequence is split (sp, TP+SP, "
      "tsp), the ranks' attention imbalance, the slowest rank's work in the step time");
  command_->add_option("--eos-id", eos_id_,
                       "with --documents: the documents of flat or llm.c .bin files end after "
                       "each token of this id, as `train --eos-id` reads them");
  command_->add_option("--layout", layout_,
                       "token layout of the sequence axis: zigzag (default), contiguous or "
                       "balanced (with --documents: chunks assigned by attention work)");
  command_->add_option("--hardware", hardware_,
                       fmt::format("hardware preset: {} (default h100)",
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

// An override flag's value: finite and within [lo, hi] (NaN fails every comparison).
double checked(double v, double lo, double hi, const char* flag, const char* unit) {
  if (!(std::isfinite(v) && v >= lo && v <= hi))
    throw ConfigError(fmt::format("{} must be a number of {} in [{:g}, {:g}] (got {})", flag, unit,
                                  lo, hi, v));
  return v;
}
// 2^30 GiB = 1 EiB: beyond any device, and its bytes stay far inside int64.
constexpr double kMaxGiB = 0x1p30;

// --pp's degrees: auto searches pipelines only across nodes (within one node a stage boundary
// buys memory at the price of a bubble, and dp x tsp holds the links there), all always, or
// the user's list, each dividing the world and at most the layers.
std::vector<int> pipeline_degrees_of(const std::string& spec, int world, const ModelConfig& m,
                                     const plan::Hardware& hw) {
  if (spec == "all" || (spec == "auto" && world > hw.devices_per_node))
    return plan::pipeline_degrees(world, m.num_hidden_layers);
  if (spec == "auto") return {1};
  std::vector<int> out;
  for (std::size_t at = 0; at <= spec.size();) {
    const std::size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, comma - at);
    char* end = nullptr;
    const long pp = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || pp < 1 || world % pp != 0 || pp > m.num_hidden_layers)
      throw ConfigError(fmt::format(
          "--pp '{}': '{}' is no pipeline degree of {} devices and {} layers; give auto, all or "
          "degrees dividing {} and at most {}, e.g. --pp 1,2",
          spec, item, world, m.num_hidden_layers, world,
          std::min<std::int64_t>(world, m.num_hidden_layers)));
    if (std::find(out.begin(), out.end(), int(pp)) == out.end()) out.push_back(int(pp));
    at = comma + 1;
  }
  return out;
}
}  // namespace

int PlanCommand::run() {
  if (world_ < 1) throw ConfigError(fmt::format("--world must be >= 1 (got {})", world_));
  if (seq_ < 1) throw ConfigError(fmt::format("--seq must be >= 1 (got {})", seq_));
  if (batch_ < 1) throw ConfigError(fmt::format("--micro-batch must be >= 1 (got {})", batch_));
  if (grad_accum_ < 1)
    throw ConfigError(fmt::format("--grad-accum must be >= 1 (got {})", grad_accum_));
  if (command_->count("--global-batch") > 0 && global_batch_ < 1)
    throw ConfigError(fmt::format("--global-batch must be >= 1 (got {})", global_batch_));
  std::vector<std::string> warnings;
  const ModelConfig model =
      config_path_.empty() ? model_preset(preset_) : load_model_config(config_path_, &warnings);
  for (const auto& w : warnings) std::cerr << "origami: warning: " << w << "\n";
  const Precision precision = Precision::parse(precision_, grad_reduce_dtype_);
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
  if (memory_gib_)
    hw.memory_bytes =
        static_cast<std::int64_t>(checked(*memory_gib_, 1.0 / kGiB, kMaxGiB, "--memory-gib", "GiB") * kGiB);
  if (peak_tflops_)
    (precision.name == "bf16" ? hw.peak_flops_bf16 : hw.peak_flops_fp32) =
        checked(*peak_tflops_, 1e-6, 1e9, "--peak-tflops", "TFLOP/s") * 1e12;
  if (achievable_) hw.achievable = checked(*achievable_, 1e-6, 1, "--achievable", "fractions");
  if (overhead_gib_)
    hw.runtime_overhead_bytes =
        static_cast<std::int64_t>(checked(*overhead_gib_, 0, kMaxGiB, "--overhead-gib", "GiB") * kGiB);
  if (intra_alpha_us_) hw.intra.alpha_s = checked(*intra_alpha_us_, 0, 1e9, "--intra-alpha-us", "us") * 1e-6;
  if (intra_gbs_) hw.intra.beta_Bps = checked(*intra_gbs_, 1e-6, 1e9, "--intra-gbs", "GB/s") * 1e9;
  if (inter_alpha_us_) hw.inter.alpha_s = checked(*inter_alpha_us_, 0, 1e9, "--inter-alpha-us", "us") * 1e-6;
  if (inter_gbs_) hw.inter.beta_Bps = checked(*inter_gbs_, 1e-6, 1e9, "--inter-gbs", "GB/s") * 1e9;

  plan::Workload work;
  work.batch = batch_;
  work.grad_accum = grad_accum_;
  work.global_batch = global_batch_;
  work.seq = seq_;
  work.recompute = plan::parse_recompute(recompute_);
  work.set_precision(precision);
  work.shard_optimizer = shard_optimizer_;
  plan::check_countable(model, work);  // --seq 2^62 overflowed every byte count
  const parallel::TokenLayoutKind layout = parallel::parse_token_layout(layout_);
  if (layout == parallel::TokenLayoutKind::Full)
    throw ConfigError("--layout full is no layout of a split sequence; use zigzag, contiguous "
                      "or balanced");
  work.contiguous = layout == parallel::TokenLayoutKind::Contiguous;
  if (layout == parallel::TokenLayoutKind::Balanced && documents_.empty())
    throw ConfigError("--layout balanced balances the attention work of packed documents and "
                      "needs --documents (one causal document per row is what zigzag already "
                      "balances); add --documents or use --layout zigzag");
  if (eos_id_ >= 0 && documents_.empty())
    throw ConfigError(fmt::format("--eos-id {} cuts the documents of a flat .bin given to "
                                  "--documents; add --documents FILE.bin or drop --eos-id",
                                  eos_id_));
  if (!documents_.empty())
    work.documents =
        std::make_shared<const plan::DocumentSample>(
            document_sample(documents_, seq_, layout, eos_id_));
  std::vector<parallel::TspSchedule> schedules;
  for (std::size_t at = 0; at <= tsp_schedules_.size();) {
    const std::size_t comma = std::min(tsp_schedules_.find(',', at), tsp_schedules_.size());
    schedules.push_back(parallel::parse_tsp_schedule(tsp_schedules_.substr(at, comma - at)));
    at = comma + 1;
  }

  const std::vector<int> pp_degrees = pipeline_degrees_of(pp_, world_, model, hw);

  PlanReport report{config_path_.empty() ? preset_ : config_path_, model, seq_, batch_,
                    grad_accum_, world_,
                    precision, recompute_, hw,
                    plan::plan_rows(model, world_, work, hw, schedules, pp_degrees), {}, {},
                    {}, global_batch_, {}, work.documents, shard_optimizer_};
  std::vector<plan::PlanRow>& rows = report.rows;
  // The longest sequence each layout fits; per strategy family, the best of its layouts.
  auto& longest = report.longest;
  for (plan::PlanRow& r : rows) {
    r.max_seq = plan::longest_sequence(model, r.layout, work, hw).value_or(0);
    auto& best = longest[family_label(r.layout)];
    if (r.max_seq > best.first) best = {r.max_seq, r.layout};
  }
  for (int D = 1; D <= std::min(world_, hw.devices_per_node); D *= 2) {
    if (world_ % D != 0) continue;
    try {
      report.inference.push_back(plan::predict_inference(model, D, work, hw));
    } catch (const ConfigError& e) {
      report.inference_errors.push_back(fmt::format("tsp={}: {}", D, e.what()));
    }
  }

  // What the user is told when nothing runs or nothing fits: on standard error, and in the JSON.
  const bool any_feasible =
      std::any_of(rows.begin(), rows.end(), [](const plan::PlanRow& r) { return r.error.empty(); });
  if (!any_feasible) {
    report.advice = fmt::format(
        "no layout of {} devices can run this model and sequence: every row is refused (see "
        "its reason); change --world, --seq or --micro-batch",
        world_);
  } else if (const std::optional<plan::NoFitAdvice> advice =
                 plan::explain_no_fit(model, world_, work, hw, rows)) {
    report.advice = advice->sentence(world_, seq_, hw);
  } else if (!rows.front().recommended) {
    std::int64_t best = 0;
    for (const auto& [name, b] : longest) best = std::max(best, b.first);
    report.advice = fmt::format(
        "sequence {} fits no layout of {} x {:.2f} GiB; {}; use more devices, --recompute full, "
        "--precision bf16 or a shorter --seq",
        seq_, world_, double(hw.memory_bytes) / kGiB,
        best > 0 ? fmt::format("the longest that fits is {} tokens", best)
                 : std::string("not even the shortest sequence fits"));
  }

  const bool json = command_->count("--json") > 0;
  const bool json_stdout = json && (json_path_.empty() || json_path_ == "-");
  if (json) {
    const std::string text = plan_json(report).dump(2) + "\n";
    if (json_stdout) {
      std::cout << text;
    } else {
      std::ofstream f(json_path_);
      if (!f) throw ConfigError(fmt::format("--json: cannot write '{}'", json_path_));
      f << text;
    }
  }
  if (!json_stdout) print_plan_table(std::cout, report);
  if (!plot_path_.empty()) plot_memory_vs_sequence(model, world_, work, hw, plot_path_);

  // Impossible requests: explain and exit 2 (the table above still shows why per row).
  if (!report.advice.empty()) {
    std::cerr << "origami plan: " << report.advice << "\n";
    return 2;
  }
  return 0;
}

}  // namespace origami::cli
