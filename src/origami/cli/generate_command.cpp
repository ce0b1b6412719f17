#include "origami/cli/generate_command.h"

#include "origami/cli/dry_run_flags.h"
#include "origami/cli/machine_peak.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "origami/comm/mpi_transport.h"
#include "origami/comm/run_ranks.h"
#include "origami/core/error.h"
#include "origami/infer/dry_run.h"
#include "origami/infer/engine.h"
#include "origami/kernels/simd.h"
#include "origami/kernels/threads.h"
#include "origami/train/checkpoint.h"
#include "origami/train/data.h"
#include "origami/train/parallel_train.h"
#include "origami/io/text_file.h"

namespace origami::cli {

namespace {

namespace fs = std::filesystem;

ModelConfig model_of(const GenerateOptions& o) {
  std::vector<std::string> warnings;
  ModelConfig saved;
  if (!o.checkpoint.empty()) {
    ckpt::require_complete(o.checkpoint, "--checkpoint");
    saved = parse_model_config(ckpt::read_index(o.checkpoint).at("config").dump(), &warnings);
  } else {
    const std::string cfg = o.model_dir + "/config.json";
    if (!fs::is_regular_file(cfg) || !fs::is_regular_file(o.model_dir + "/model.safetensors"))
      throw ConfigError(
          fmt::format("--model-dir {}: needs config.json and model.safetensors "
                      "(an `origami export` folder)",
                      o.model_dir));
    saved = load_model_config(cfg, &warnings);
  }
  if (!o.config_path.empty()) {
    const ModelConfig want = load_model_config(o.config_path, &warnings);
    // The same check a load makes (a ConfigError naming both shapes), before any rank starts.
    if (model_config_to_json(want) != model_config_to_json(saved)) {
      const auto shape = [](const ModelConfig& c) {
        return fmt::format("vocab {}, h {}, intermediate {}, {} layers, {} heads, {} kv heads",
                           c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers,
                           c.num_attention_heads, c.num_key_value_heads);
      };
      throw ConfigError(fmt::format("--config {} describes {} but the model to load has {}",
                                    o.config_path, shape(want), shape(saved)));
    }
  }
  return saved;
}

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

}  // namespace

GenerateResult generate(const GenerateOptions& o,
                        const std::function<void(std::int64_t, std::int32_t)>& stream) {
  if (o.checkpoint.empty() == o.model_dir.empty())
    throw ConfigError("give exactly one of --checkpoint DIR or --model-dir DIR");
  if (o.prompts.empty()) throw ConfigError("give a prompt: --prompt TEXT or --prompt-file FILE");
  if (o.max_new_tokens < 1)
    throw ConfigError(fmt::format("--max-new-tokens {} must be >= 1", o.max_new_tokens));
  infer::validate(o.sampling);
  if (o.strategy != "single" && o.strategy != "tsp")
    throw ConfigError(fmt::format("--strategy {}: generate runs single or tsp", o.strategy));
  if (o.backend != "auto" && o.backend != "threads" && o.backend != "mpi")
    throw ConfigError(fmt::format("unknown --backend '{}'; use threads or mpi", o.backend));
  const bool mpi = launched_by_mpirun();
  if (o.backend == "mpi" && !mpi)
    throw ConfigError("--backend mpi needs mpirun, e.g. mpirun -np 2 origami generate ...");
  if (o.backend == "threads" && mpi)
    throw ConfigError("--backend threads under mpirun: drop --backend or run without mpirun");
  const parallel::TokenLayoutKind layout = parallel::parse_token_layout(o.layout);
  const ModelConfig config = model_of(o);
  std::vector<std::vector<std::int32_t>> prompts;
  for (std::size_t i = 0; i < o.prompts.size(); ++i) {
    prompts.push_back(data::ByteTokenizer::encode(o.prompts[i]));
    const auto n = static_cast<std::int64_t>(prompts.back().size());
    if (n == 0) throw ConfigError(fmt::format("prompt {} is empty; give at least one byte", i));
    if (n + o.max_new_tokens > config.max_position_embeddings)
      throw ConfigError(
          fmt::format("prompt {} has {} tokens; with --max-new-tokens {} that exceeds the model's "
                      "max_position_embeddings {}: shorten the prompt or lower --max-new-tokens",
                      i, n, o.max_new_tokens, config.max_position_embeddings));
    for (std::int32_t id : prompts.back())
      if (id >= config.vocab_size)
        throw ConfigError(
            fmt::format("prompt {}: byte {} is outside the model's vocabulary of "
                        "{} (the byte tokenizer needs 256)",
                        i, id, config.vocab_size));
  }
  int D = 1;
  if (o.strategy == "tsp") D = o.degree > 0 ? o.degree : 2;
  if (o.strategy == "single" && o.degree > 1)
    throw ConfigError(
        fmt::format("--degree {} with --strategy single; use --strategy tsp", o.degree));
  if (mpi) {
    const char* n = std::getenv("OMPI_COMM_WORLD_SIZE");
    const int world = n != nullptr ? std::max(1, std::atoi(n)) : 1;
    if (o.degree > 0 && o.degree != world)
      throw ConfigError(
          fmt::format("--degree {} under mpirun -np {}; they must agree", o.degree, world));
    D = world;
  }
  parallel::check_tensor_split(config, D, "tsp");

  GenerateResult result;
  std::mutex m;
  auto rank_fn = [&](comm::Communicator& world) {
    const bool lead = world.rank() == 0;
    MemoryTracker& tracker = world.tracker();
    infer::InferenceEngine e(config, world, tracker, layout);
    const std::string dir = o.checkpoint.empty() ? o.model_dir : o.checkpoint;
    ckpt::load(dir, config, ckpt::RankState{&e.specs(), &e.params(), nullptr});
    const auto B = static_cast<std::int64_t>(prompts.size());
    std::vector<std::vector<std::int32_t>> out(prompts.size());
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    const Tensor* logits = &e.prefill(prompts, o.max_new_tokens);
    std::vector<std::int32_t> tok =
        infer::sample_tokens(e.axis(), logits->f32(), B, e.vocab(), o.sampling, 0);
    const auto t1 = std::chrono::steady_clock::now();
    for (std::int64_t t = 0;; ++t) {
      for (std::int64_t b = 0; b < B; ++b) {
        out[static_cast<std::size_t>(b)].push_back(tok[static_cast<std::size_t>(b)]);
        if (lead) stream(b, tok[static_cast<std::size_t>(b)]);
      }
      if (t + 1 == o.max_new_tokens) break;
      logits = &e.decode(tok);
      tok = infer::sample_tokens(e.axis(), logits->f32(), B, e.vocab(), o.sampling, t + 1);
    }
    const auto t2 = std::chrono::steady_clock::now();
    const MemoryStats mine = tracker.stats();
    std::vector<std::int64_t> v(mine.peak.begin(), mine.peak.end());
    v.push_back(mine.peak_total);
    std::vector<std::int64_t> all(v.size() * static_cast<std::size_t>(world.size()));
    world.all_gather(v, all);
    if (!lead) return;
    std::lock_guard lock(m);
    result.tokens = out;
    for (const auto& p : prompts) result.prefill_tokens += static_cast<std::int64_t>(p.size());
    result.decode_tokens = B * (o.max_new_tokens - 1);
    result.prefill_s = std::chrono::duration<double>(t1 - t0).count();
    result.decode_s = std::chrono::duration<double>(t2 - t1).count();
    for (int r = 0; r < world.size(); ++r) {
      MemoryStats s;
      for (int c = 0; c < kNumMemCategories; ++c)
        s.peak[static_cast<std::size_t>(c)] =
            all[static_cast<std::size_t>(r) * v.size() + static_cast<std::size_t>(c)];
      s.peak_total = all[static_cast<std::size_t>(r + 1) * v.size() - 1];
      result.rank_memory.push_back(s);
    }
  };
  if (mpi) {
    kernels::set_thread_count(o.threads);
    const int code = comm::mpi_main([&](comm::Communicator& world) {
      rank_fn(world);
      return 0;
    });
    if (code != 0) throw Error(fmt::format("the MPI run ended with code {}", code));
  } else {
    comm::RunOptions ranks;
    ranks.kernel_threads = std::max(1, o.threads / D);  // the cores split among the ranks
    comm::run_ranks(D, rank_fn, ranks);
  }
  return result;
}

GenerateCommand::GenerateCommand(CLI::App& app) {
  command_ = app.add_subcommand("generate", "Generate text from a trained model");
  GenerateOptions& o = options_;
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  command_->add_option("--checkpoint", o.checkpoint, "checkpoint folder (DIR/step-N)");
  command_->add_option("--model-dir", o.model_dir,
                       "Hugging Face folder: config.json + model.safetensors (origami export)");
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
  command_->add_option("--layout", o.layout, "prefill token layout: zigzag or contiguous")
      ->capture_default_str();
  command_->add_option("--backend", o.backend, "threads or mpi (chosen under mpirun)")
      ->capture_default_str();
  command_->add_option("--threads", o.threads, "kernel threads in all")->capture_default_str();
  // The dry run: the real engine on unbacked tensors, virtual clocks (infer/dry_run.h).
  command_->add_flag("--dry-run", dry_run_,
                     "run without computing: a TSP prefill of synthetic prompts and greedy "
                     "decode, memory accounted not allocated, virtual prefill and decode times");
  const auto dry = [&](CLI::Option* opt) {
    dry_options_.push_back(opt->capture_default_str());
  };
  dry(command_->add_option("--model", preset_,
                           "dry run: built-in model preset (tiny, small, 1b, 7b, 13b, 70b)"));
  dry(command_->add_option("--prompt-tokens", prompt_tokens_, "dry run: tokens per prompt"));
  dry(command_->add_option("--batch", batch_, "dry run: prompts"));
  dry(command_->add_option("--flops-rate", flops_rate_gflops_,
                           "dry run: GFLOP/s of one rank (gemm and attention FLOPs)"));
  dry(command_->add_option("--memory-bw", memory_bw_gbps_,
                           "dry run: GB/s of one rank's memory; a GEMM or attention charges "
                           "max(FLOPs/rate, bytes read/bandwidth) (0: off)"));
  dry(command_->add_option("--precision", precision_, "dry run: element sizes, fp32 or bf16"));
  dry(command_->add_option("--json", json_path_, "dry run: write the report as JSON to this file"));
  for (CLI::Option* opt : add_link_flags(*command_, link_, "dry run: "))
    dry_options_.push_back(opt);
}

int GenerateCommand::run_dry() {
  const GenerateOptions& o = options_;
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
  if (launched_by_mpirun())
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
  const bool one = options_.prompts.size() == 1;
  const auto piece = [](std::int32_t id) {
    return id < 256 ? std::string(1, static_cast<char>(id)) : fmt::format("<{}>", id);
  };
  // One prompt: the text streams as tokens arrive; a batch: each sequence at the end.
  bool started = false;  // (the callback runs on rank 0 only: one copy of the text)
  const GenerateResult r = generate(options_, [&](std::int64_t, std::int32_t id) {
    if (!one) return;
    if (!started) std::cout << options_.prompts[0];
    started = true;
    std::cout << piece(id) << std::flush;
  });
  if (r.tokens.empty()) return 0;  // not rank 0 of an MPI run
  if (one) std::cout << "\n";
  for (std::size_t b = 0; !one && b < r.tokens.size(); ++b) {
    std::string text = options_.prompts[b];
    for (std::int32_t id : r.tokens[b]) text += piece(id);
    std::cout << fmt::format("[{}] {}\n", b, text);
  }
  std::cout << fmt::format("kernels: SIMD target {} ({})\n", kernels::simd_target(),
                           cpu_model_name());
  std::cout << fmt::format("prefill: {} tokens in {:.3f} s, {:.0f} tokens/s\n", r.prefill_tokens,
                           r.prefill_s, static_cast<double>(r.prefill_tokens) / r.prefill_s);
  std::cout << fmt::format(
      "decode: {} tokens in {:.3f} s, {:.0f} tokens/s (batch {})\n", r.decode_tokens, r.decode_s,
      r.decode_s > 0 ? static_cast<double>(r.decode_tokens) / r.decode_s : 0.0, r.tokens.size());
  std::cout << "peak memory per rank by category:\n" << memory_table(r.rank_memory) << std::flush;
  return 0;
}

}  // namespace origami::cli
