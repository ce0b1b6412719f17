#include "origami/cli/generate_command.h"

#include "origami/cli/dry_run_flags.h"
#include "origami/cli/machine_peak.h"

#include <algorithm>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "origami/comm/mpi_launch.h"
#include "origami/core/error.h"
#include "origami/dryrun/inference.h"
#include "origami/io/text_file.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/simd.h"

namespace origami::cli {

namespace {

std::string memory_table(const std::vector<MemoryStats>& ranks) {
  const MemCategory shown[] = {MemCategory::Parameters,  MemCategory::KvCache,
                               MemCategory::Workspace,   MemCategory::CommBuffers,
                               MemCategory::Activations, MemCategory::Logits};
  std::string out = fmt::format("{:<6}", "rank");
  for (MemCategory c : shown)
    out += fmt::format(
        "{:>24}", c == MemCategory::Parameters ? "weights" : std::string(mem_category_name(c)));
  out += fmt::format("{:>14}\n", "peak total");
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    out += fmt::format("{:<6}", r);
    for (MemCategory c : shown)
      out += fmt::format("{:>24}", format_bytes(ranks[r].peak[static_cast<std::size_t>(c)]));
    out += fmt::format("{:>14}\n", format_bytes(ranks[r].peak_total));
  }
  return out;
}

// Decode reads every weight once per step: bytes of weights per second against what this
// machine's memory delivers to as many threads (measured after the run, when no rank competes
// for it, and cached). Under mpirun across hosts it is this host's ceiling.
void print_decode_bandwidth(const infer::GenerateResult& r) {
  if (r.decode_steps == 0 || r.decode_s <= 0) return;
  const double achieved = static_cast<double>(r.step_weight_bytes) *
                          static_cast<double>(r.decode_steps) / r.decode_s / 1e9;
  const int threads = r.kernel_threads;
  const MemoryBandwidth ceiling = memory_bandwidth(threads);
  std::cout << fmt::format(
      "decode weight reads: {:.1f} GB/s ({:.1f} MB of weights per step), {:.0f}% of the "
      "measured {:.1f} GB/s memory read ceiling of {} thread{} (copy {:.1f} GB/s; {})\n",
      achieved, static_cast<double>(r.step_weight_bytes) / 1e6, 100.0 * achieved / ceiling.read_gbs,
      ceiling.read_gbs, threads, threads == 1 ? "" : "s", ceiling.copy_gbs, ceiling.source);
}

}  // namespace

GenerateCommand::GenerateCommand(CLI::App& app) {
  command_ = app.add_subcommand("generate", "Generate text from a trained model");
  infer::GenerateOptions& o = options_;
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  command_->add_option("--checkpoint", o.checkpoint, "checkpoint folder (DIR/step-N)");
  command_->add_option("--model-dir", o.model_dir,
                       "Hugging Face folder: config.json, model.safetensors (or shards and "
                       "model.safetensors.index.json), tokenizer.json, generation_config.json");
  command_->add_option("--tokenizer", o.tokenizer,
                       "tokenizer.json, .model or \"byte\" (default: the model folder's, else "
                       "bytes)");
  command_->add_option("--stop", o.stops,
                       "stop string: the text ends before it (repeatable); eos ids come from "
                       "generation_config.json");
  command_->add_option("--config", o.config_path,
                       "config.json the model must match (refused otherwise)");
  command_->add_option("--prompt", o.prompts, "prompt text (repeat for a batch)");
  command_->add_option("--prompt-file", prompt_files_, "file holding one prompt (repeatable)");
  command_->add_option("--max-new-tokens", o.max_new_tokens, "tokens to generate per prompt")
      ->capture_default_str();
  command_->add_option("--temperature", o.sampling.temperature, "0: greedy")->capture_default_str();
  command_->add_option("--top-k", o.sampling.top_k, "keep the k most likely (0: off)")
      ->capture_default_str();
  command_->add_option("--top-p", o.sampling.top_p, "nucleus mass (1: off)")->capture_default_str();
  command_->add_option("--seed", o.sampling.seed, "sampling seed")->capture_default_str();
  command_->add_option("--strategy", o.strategy, "single or tsp")->capture_default_str();
  command_->add_option("--degree", o.degree, "tsp ranks (default 2; under mpirun the world)");
  command_->add_option("--layout", o.layout, "prefill token layout: zigzag or contiguous (balanced is for "
                       "packed training documents)")
      ->capture_default_str();
  command_->add_option("--backend", o.backend, "threads or mpi (chosen under mpirun)")
      ->capture_default_str();
  command_->add_option("--threads", o.threads, "kernel threads in all")->capture_default_str();
  // The dry run: the real engine on unbacked tensors, virtual clocks (dryrun/inference.h).
  command_->add_flag("--dry-run", dry_run_,
                     "run without computing: a TSP prefill of synthetic prompts and greedy "
                     "decode, memory accounted not allocated, virtual prefill and decode times");
  const auto dry = [&](CLI::Option* opt) {
    dry_options_.push_back(opt->capture_default_str());
  };
  dry(command_->add_option("--model", preset_,
                           "dry run: built-in model preset (tiny, tiny-moe, small, 1b, 7b, "
                           "13b, 70b)"));
  dry(command_->add_option("--prompt-tokens", prompt_tokens_, "dry run: tokens per prompt"));
  dry(command_->add_option("--batch", batch_, "dry run: prompts"));
  dry(command_->add_option("--flops-rate", flops_rate_gflops_,
                           "dry run: GFLOP/s of one rank (gemm and attention FLOPs)"));
  dry(command_->add_option("--memory-bw", memory_bw_gbps_,
                           "dry run: GB/s of one rank's memory; a GEMM or attention charges "
                           "max(FLOPs/rate, bytes read/bandwidth) (0: off)"));
  command_
      ->add_option("--precision", precision_,
                   "fp32, or bf16: bf16 weights and KV cache, fp32 accumulation (the dry run: "
                   "its element sizes)")
      ->capture_default_str();
  dry(command_->add_option("--json", json_path_, "dry run: write the report as JSON to this file"));
  for (CLI::Option* opt : add_link_flags(*command_, link_, "dry run: "))
    dry_options_.push_back(opt);
}

int GenerateCommand::run_dry() {
  const infer::GenerateOptions& o = options_;
  if (!o.checkpoint.empty() || !o.model_dir.empty() || !o.prompts.empty() ||
      !prompt_files_.empty())
    throw ConfigError(
        "--dry-run needs no checkpoint and no prompt: give --model (or --config) and "
        "--prompt-tokens, --batch");
  if (o.sampling.temperature != 0)
    throw ConfigError("--dry-run decodes greedily: drop --temperature");
  if (o.strategy != "single" && o.strategy != "tsp")
    throw ConfigError(fmt::format("--strategy {}: generate runs single or tsp", o.strategy));
  if (preset_.empty() == o.config_path.empty())
    throw ConfigError("--dry-run: give exactly one of --model PRESET or --config FILE");
  if (comm::launched_by_mpirun())
    throw ConfigError("--dry-run simulates its ranks in one process: run it without mpirun");
  std::vector<std::string> warnings;
  ModelConfig model =
      preset_.empty() ? load_model_config(o.config_path, &warnings) : model_preset(preset_);
  for (const std::string& w : warnings) std::cerr << "origami: warning: " << w << "\n";
  // --degree D alone means TSP over D simulated ranks (D = 1: one device).
  const int D = o.degree > 0 ? o.degree : (o.strategy == "tsp" ? 2 : 1);
  infer::InferDryRunOptions d;
  d.prompt_tokens = prompt_tokens_;
  d.batch = batch_;
  d.new_tokens = o.max_new_tokens;
  d.layout = parallel::parse_token_layout(o.layout);
  d.precision = Precision::parse(precision_);
  if (!(flops_rate_gflops_ > 0))
    throw ConfigError(fmt::format("--flops-rate must be > 0 GFLOP/s, got {}", flops_rate_gflops_));
  if (!(memory_bw_gbps_ >= 0))
    throw ConfigError(fmt::format("--memory-bw must be >= 0 GB/s (0: off), got {}", memory_bw_gbps_));
  d.flop_rate = flops_rate_gflops_ * 1e9;
  d.memory_bw = memory_bw_gbps_ * 1e9;
  d.link = link_;
  const std::int64_t need = prompt_tokens_ + o.max_new_tokens;
  if (need > model.max_position_embeddings) {
    // A long-context run of a preset: the position range grows to the prompt and its tokens.
    std::cout << fmt::format("dry run: max_position_embeddings {} raised to {}\n",
                             model.max_position_embeddings, need);
    model.max_position_embeddings = need;
  }
  std::cout << fmt::format(
      "dry run: {} parameters, tsp={} simulated ranks, {} prompts x {} tokens, {} new tokens, "
      "precision {}, {:.4g} GFLOP/s{} per rank, {}\n",
      model.num_parameters(), D, d.batch, d.prompt_tokens, d.new_tokens, d.precision.name,
      flops_rate_gflops_,
      memory_bw_gbps_ > 0 ? fmt::format(" and {:.4g} GB/s", memory_bw_gbps_) : std::string(),
      dry_run_links(link_));
  const infer::InferDryRunReport r = infer::infer_dry_run(model, D, d);
  std::cout << r.summary();
  if (!json_path_.empty()) write_json_file(json_path_, r.to_json());
  return 0;
}

int GenerateCommand::run() {
  if (dry_run_) return run_dry();
  for (CLI::Option* opt : dry_options_)
    if (opt->count() > 0)
      throw ConfigError(fmt::format("{} belongs to --dry-run (add it, or drop {})",
                                    opt->get_name(), opt->get_name()));
  for (const std::string& path : prompt_files_) {
    options_.prompts.push_back(io::read_text_file(path, io::kPromptFileLimit, "--prompt-file"));
  }
  options_.precision = precision_;
  if (precision_ == "bf16")
    std::cerr << "origami: bf16: weights and KV cache held in bf16; decode widens them to fp32 "
                 "inside its kernels; prefill: "
              << kernels::linear_forward_bf16_path() << "\n";
  const bool one = options_.prompts.size() == 1;
  // One prompt: the text streams as it becomes final; a batch: each sequence at the end.
  bool started = false;  // (the callback runs on rank 0 only: one copy of the text)
  const infer::GenerateResult r =
      infer::generate(options_, [&](std::int64_t, const std::string& piece) {
        if (!one) return;
        if (!started) std::cout << options_.prompts[0];
        started = true;
        std::cout << piece << std::flush;
      });
  if (r.tokens.empty()) return 0;  // not rank 0 of an MPI run
  if (one) std::cout << (started ? "" : options_.prompts[0]) << "\n";
  for (const std::string& w : r.warnings) std::cerr << "origami: warning: " << w << "\n";
  for (std::size_t b = 0; !one && b < r.tokens.size(); ++b)
    std::cout << fmt::format("[{}] {}{}\n", b, options_.prompts[b], r.texts[b]);
  // Why each sequence ended (eos, stop, length) and how many tokens it got.
  std::string reasons, counts;
  for (std::size_t b = 0; b < r.tokens.size(); ++b) {
    reasons += (b == 0 ? "" : ", ") + std::string(infer::finish_reason_name(r.finish[b]));
    counts += (b == 0 ? "" : ", ") + std::to_string(r.tokens[b].size());
  }
  std::cout << fmt::format("finished: {} (new tokens: {})\n", reasons, counts);
  std::cout << fmt::format("kernels: SIMD target {} ({})\n", kernels::simd_target(),
                           cpu_model_name());
  std::cout << fmt::format("prefill: {} tokens in {:.3f} s, {:.0f} tokens/s\n", r.prefill_tokens,
                           r.prefill_s, static_cast<double>(r.prefill_tokens) / r.prefill_s);
  std::cout << fmt::format(
      "decode: {} tokens in {:.3f} s, {:.0f} tokens/s (batch {})\n", r.decode_tokens, r.decode_s,
      r.decode_s > 0 ? static_cast<double>(r.decode_tokens) / r.decode_s : 0.0, r.tokens.size());
  print_decode_bandwidth(r);
  std::cout << "peak memory per rank by category:\n" << memory_table(r.rank_memory) << std::flush;
  return 0;
}

}  // namespace origami::cli
