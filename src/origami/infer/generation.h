// Text generation as a library (what `origami generate` runs): the model loaded from a
// checkpoint or a Hugging Face folder, prompts encoded by its tokenizer, single device or TSP
// over D ranks (threads, or MPI under mpirun), the TSP prefill, the weight-stationary decode
// and sampling without gathering logits (engine.h, sampling.h, docs/inference.md), stopping
// at an eos token or a stop string, decoded text streamed as it becomes final (text_stream.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "origami/core/memory_tracker.h"
#include "origami/infer/sampling.h"
#include "origami/model/config.h"
#include "origami/tokenizer/tokenizer.h"

namespace origami::infer {

struct GenerateOptions {
  std::string checkpoint;   // a train/checkpoint folder (DIR/step-N)
  std::string model_dir;    // or a Hugging Face folder: config.json, model.safetensors (or
                            // shards + index), tokenizer.json, generation_config.json
  std::string config_path;  // optional: the model the user expects (must match)
  std::string tokenizer;    // optional: tokenizer path; else the folder's, else bytes
  std::vector<std::string> prompts;
  std::vector<std::string> stops;  // stop strings: the text ends before the first one
  std::int64_t max_new_tokens = 32;
  SamplingOptions sampling;
  std::string strategy = "single";  // single or tsp
  int degree = 0;                   // tsp ranks (0: 2, or the mpirun world)
  std::string layout = "zigzag";
  std::string backend = "auto";
  int threads = 1;
  std::string precision = "fp32";  // or bf16: InferenceEngine::use_bf16
};

// Why a sequence ended.
enum class FinishReason { Length, Eos, Stop };
const char* finish_reason_name(FinishReason reason);

struct GenerateResult {
  std::vector<std::vector<std::int32_t>> tokens;  // generated ids per prompt (no eos)
  std::vector<std::string> texts;                 // their text, cut before a stop string
  std::vector<FinishReason> finish;
  std::int64_t prefill_tokens = 0, decode_tokens = 0;
  double prefill_s = 0, decode_s = 0;
  std::int64_t decode_steps = 0;
  std::int64_t step_weight_bytes = 0;  // weights one decode step reads, all ranks together
  int kernel_threads = 0;              // the ranks' kernel threads, all ranks together
  std::vector<MemoryStats> rank_memory;
  std::vector<std::string> warnings;  // GenerationSetup's
};

// What generate() will run, resolved and checked before any rank starts: the model, its
// tokenizer (null: bytes), the encoded prompts and the eos ids.
struct GenerationSetup {
  ModelConfig config;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<std::int32_t> eos;
  std::string weights_dir;  // the checkpoint or the model folder
  std::vector<std::string> warnings;  // for people (a tokenizer other than the recorded one)
};
GenerationSetup prepare_generation(const GenerateOptions& options);

// Checks everything (ConfigError naming the flag or file) before any rank starts, runs, and
// calls `stream(sequence, text)` on rank 0 as each sequence's text becomes final. Under
// mpirun every process calls it; only rank 0's result holds the tokens.
GenerateResult generate(const GenerateOptions& options,
                        const std::function<void(std::int64_t, const std::string&)>& stream);

}  // namespace origami::infer
