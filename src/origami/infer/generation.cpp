#include "origami/infer/generation.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "origami/checkpoint/checkpoint.h"
#include "origami/comm/mpi_launch.h"
#include "origami/comm/mpi_transport.h"
#include "origami/comm/run_ranks.h"
#include "origami/core/error.h"
#include "origami/data/dataset.h"
#include "origami/infer/engine.h"
#include "origami/infer/text_stream.h"
#include "origami/io/generation_config.h"
#include "origami/io/hf_weights.h"
#include "origami/kernels/threads.h"
#include "origami/tokenizer/fingerprint.h"

namespace origami::infer {

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
    if (!fs::is_regular_file(cfg) || !io::has_hf_weights(o.model_dir))
      throw ConfigError(fmt::format(
          "--model-dir {}: needs config.json and {} (or shards listed by {}): a Hugging Face "
          "folder or an `origami export`",
          o.model_dir, io::kHfWeightsFile, io::kHfWeightsIndex));
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

// The tokenizer a checkpoint's run recorded (checkpoint_loop.cpp's save_step), if any.
std::optional<tokenizer::Fingerprint> recorded_tokenizer(const std::string& checkpoint) {
  if (checkpoint.empty()) return std::nullopt;
  const nlohmann::json index = ckpt::read_index(checkpoint);
  const nlohmann::json* t = nullptr;
  if (index.contains("run") && index.at("run").contains("tokenizer"))
    t = &index.at("run").at("tokenizer");
  if (t == nullptr) return std::nullopt;
  if (!t->is_object() || !t->contains("file") || !t->at("file").is_string() ||
      !t->contains("fnv1a64") || !t->at("fnv1a64").is_string())
    throw ConfigError(fmt::format("{}/{}: run.tokenizer must be {{\"file\": ..., \"fnv1a64\": "
                                  "...}}; the index was edited",
                                  checkpoint, ckpt::kIndex));
  return tokenizer::Fingerprint{t->at("file").get<std::string>(),
                                t->at("fnv1a64").get<std::string>()};
}

// --tokenizer, else the one the checkpoint's run was trained with, else the model folder's
// tokenizer.json / tokenizer.model, else none (bytes). A tokenizer whose file differs from the
// one the checkpoint recorded is used, with a warning (a renamed or re-saved copy may be the
// same vocabulary; a different one makes the text garbage, which the warning explains).
std::shared_ptr<const tokenizer::Tokenizer> tokenizer_of(const GenerateOptions& o,
                                                         const ModelConfig& config,
                                                         std::vector<std::string>& warnings) {
  const std::optional<tokenizer::Fingerprint> recorded = recorded_tokenizer(o.checkpoint);
  if (recorded && o.tokenizer.empty() && !std::filesystem::is_regular_file(recorded->file))
    throw ConfigError(fmt::format(
        "--checkpoint {} was trained with the tokenizer {}, which is gone; give it with "
        "--tokenizer (or --tokenizer byte to generate bytes)",
        o.checkpoint, recorded->file));
  std::string path = o.tokenizer.empty() && recorded ? recorded->file : o.tokenizer;
  if (recorded && path != "byte") {
    const std::optional<tokenizer::Fingerprint> now = tokenizer::fingerprint(path);
    if (now && now->fnv1a64 != recorded->fnv1a64)
      warnings.push_back(fmt::format(
          "the tokenizer {} (fnv1a64 {}) is not the file the checkpoint was trained with ({}, "
          "fnv1a64 {}): if its vocabulary differs, the text will be garbage",
          now->file, now->fnv1a64, recorded->file, recorded->fnv1a64));
  }
  if (path.empty() && !o.model_dir.empty() &&
      (fs::is_regular_file(fs::path(o.model_dir) / "tokenizer.json") ||
       fs::is_regular_file(fs::path(o.model_dir) / "tokenizer.model")))
    path = o.model_dir;
  if (path.empty() || path == "byte") return nullptr;
  std::shared_ptr<const tokenizer::Tokenizer> t = tokenizer::load(path);
  if (t->vocab_size() > config.vocab_size)
    throw ConfigError(fmt::format(
        "the tokenizer {} has {} tokens but the model's vocab_size is {}: its ids would fall "
        "outside the embedding; use the model's own tokenizer",
        path, t->vocab_size(), config.vocab_size));
  return t;
}

}  // namespace

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Length:
      return "length";
    case FinishReason::Eos:
      return "eos";
    case FinishReason::Stop:
      return "stop";
  }
  return "?";
}

GenerationSetup prepare_generation(const GenerateOptions& o) {
  if (o.checkpoint.empty() == o.model_dir.empty())
    throw ConfigError("give exactly one of --checkpoint DIR or --model-dir DIR");
  if (o.prompts.empty()) throw ConfigError("give a prompt: --prompt TEXT or --prompt-file FILE");
  if (o.max_new_tokens < 1)
    throw ConfigError(fmt::format("--max-new-tokens {} must be >= 1", o.max_new_tokens));
  for (const std::string& s : o.stops)
    if (s.empty()) throw ConfigError("--stop: a stop string must not be empty");
  GenerationSetup setup;
  setup.config = model_of(o);
  setup.weights_dir = o.checkpoint.empty() ? o.model_dir : o.checkpoint;
  setup.tokenizer = tokenizer_of(o, setup.config, setup.warnings);
  const ModelConfig& config = setup.config;
  for (std::size_t i = 0; i < o.prompts.size(); ++i) {
    // A tokenizer adds what its tokenizer_config.json / post-processor says (bos, ...).
    setup.prompts.push_back(setup.tokenizer != nullptr ? setup.tokenizer->encode(o.prompts[i], true)
                                                       : data::ByteTokenizer::encode(o.prompts[i]));
    const std::vector<std::int32_t>& ids = setup.prompts.back();
    const auto n = static_cast<std::int64_t>(ids.size());
    if (n == 0) throw ConfigError(fmt::format("prompt {} is empty; give at least one byte", i));
    if (n + o.max_new_tokens > config.max_position_embeddings)
      throw ConfigError(
          fmt::format("prompt {} has {} tokens; with --max-new-tokens {} that exceeds the model's "
                      "max_position_embeddings {}: shorten the prompt or lower --max-new-tokens",
                      i, n, o.max_new_tokens, config.max_position_embeddings));
    for (std::int32_t id : ids)
      if (id >= config.vocab_size)
        throw ConfigError(
            fmt::format("prompt {}: byte {} is outside the model's vocabulary of "
                        "{} (the byte tokenizer needs 256)",
                        i, id, config.vocab_size));
  }
  const std::string gen_config = o.model_dir + "/generation_config.json";
  if (!o.model_dir.empty() && fs::is_regular_file(gen_config))
    setup.eos = io::read_eos_token_ids(gen_config, config.vocab_size);
  else if (setup.tokenizer != nullptr && setup.tokenizer->special_tokens().eos)
    setup.eos = {*setup.tokenizer->special_tokens().eos};
  return setup;
}

GenerateResult generate(const GenerateOptions& o,
                        const std::function<void(std::int64_t, const std::string&)>& stream) {
  validate(o.sampling);
  if (o.strategy != "single" && o.strategy != "tsp")
    throw ConfigError(fmt::format("--strategy {}: generate runs single or tsp", o.strategy));
  if (o.backend != "auto" && o.backend != "threads" && o.backend != "mpi")
    throw ConfigError(fmt::format("unknown --backend '{}'; use threads or mpi", o.backend));
  const bool mpi = comm::launched_by_mpirun();
  if (o.backend == "mpi" && !mpi)
    throw ConfigError("--backend mpi needs mpirun, e.g. mpirun -np 2 origami generate ...");
  if (o.backend == "threads" && mpi)
    throw ConfigError("--backend threads under mpirun: drop --backend or run without mpirun");
  const parallel::TokenLayoutKind layout = parallel::parse_token_layout(o.layout);
  if (o.precision != "fp32" && o.precision != "bf16")
    throw ConfigError(fmt::format("--precision {}: use fp32 or bf16", o.precision));
  const bool bf16 = o.precision == "bf16";
  const GenerationSetup setup = prepare_generation(o);
  const ModelConfig& config = setup.config;
  const std::vector<std::vector<std::int32_t>>& prompts = setup.prompts;
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
  check_inference_degree(config, D);

  GenerateResult result;
  result.warnings = setup.warnings;
  std::mutex m;
  auto rank_fn = [&](comm::Communicator& world) {
    const bool lead = world.rank() == 0;
    MemoryTracker& tracker = world.tracker();
    InferenceEngine e(config, world, tracker, layout);
    ckpt::load(setup.weights_dir, config, ckpt::RankState{&e.specs(), &e.params(), nullptr});
    if (bf16) e.use_bf16();
    const auto B = static_cast<std::int64_t>(prompts.size());
    std::vector<std::vector<std::int32_t>> out(prompts.size());
    // Every rank decodes and decides stops alike (the same ids), so all stop together.
    std::vector<TextStream> texts;
    std::vector<FinishReason> finish(prompts.size(), FinishReason::Length);
    std::vector<bool> done(prompts.size(), false);
    for (std::size_t b = 0; b < prompts.size(); ++b)
      texts.emplace_back(setup.tokenizer.get(), o.stops);
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    const Tensor* logits = &e.prefill(prompts, o.max_new_tokens);
    std::vector<std::int32_t> tok =
        sample_tokens(e.axis(), logits->f32(), B, e.vocab(), o.sampling, 0);
    const auto t1 = std::chrono::steady_clock::now();
    std::int64_t decode_steps = 0;
    for (std::int64_t t = 0;; ++t) {
      for (std::size_t b = 0; b < prompts.size(); ++b) {
        if (done[b]) continue;
        const std::int32_t id = tok[b];
        if (std::find(setup.eos.begin(), setup.eos.end(), id) != setup.eos.end()) {
          done[b] = true;
          finish[b] = FinishReason::Eos;
          continue;
        }
        out[b].push_back(id);
        const std::string piece = texts[b].push(id);
        if (lead && !piece.empty()) stream(static_cast<std::int64_t>(b), piece);
        if (texts[b].stopped()) {
          done[b] = true;
          finish[b] = FinishReason::Stop;
        }
      }
      if (t + 1 == o.max_new_tokens ||
          std::all_of(done.begin(), done.end(), [](bool d) { return d; }))
        break;
      // A finished sequence keeps decoding its last id (one batch, one step); its output is
      // dropped.
      logits = &e.decode(tok);
      ++decode_steps;
      tok = sample_tokens(e.axis(), logits->f32(), B, e.vocab(), o.sampling, t + 1);
    }
    for (std::size_t b = 0; b < prompts.size(); ++b) {
      const std::string rest = texts[b].finish();
      if (lead && !rest.empty()) stream(static_cast<std::int64_t>(b), rest);
    }
    const auto t2 = std::chrono::steady_clock::now();
    const std::int64_t weight_bytes = e.step_weight_bytes();  // this rank's; summed below
    const MemoryStats mine = tracker.stats();
    std::vector<std::int64_t> v(mine.peak.begin(), mine.peak.end());
    v.push_back(mine.peak_total);
    v.push_back(weight_bytes);
    v.push_back(kernels::thread_count());  // this rank's kernel threads
    std::vector<std::int64_t> all(v.size() * static_cast<std::size_t>(world.size()));
    world.all_gather(v, all);
    if (!lead) return;
    std::lock_guard lock(m);
    result.tokens = out;
    for (const TextStream& s : texts) result.texts.push_back(s.text());
    result.finish = finish;
    for (const auto& p : prompts) result.prefill_tokens += static_cast<std::int64_t>(p.size());
    result.decode_tokens = B * decode_steps;
    result.decode_steps = decode_steps;
    result.prefill_s = std::chrono::duration<double>(t1 - t0).count();
    result.decode_s = std::chrono::duration<double>(t2 - t1).count();
    for (int r = 0; r < world.size(); ++r) {
      MemoryStats s;
      for (int c = 0; c < kNumMemCategories; ++c)
        s.peak[static_cast<std::size_t>(c)] =
            all[static_cast<std::size_t>(r) * v.size() + static_cast<std::size_t>(c)];
      s.peak_total = all[static_cast<std::size_t>(r + 1) * v.size() - 3];
      result.step_weight_bytes += all[static_cast<std::size_t>(r + 1) * v.size() - 2];
      result.kernel_threads +=
          static_cast<int>(all[static_cast<std::size_t>(r + 1) * v.size() - 1]);
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

}  // namespace origami::infer
