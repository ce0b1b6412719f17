// The inference dry run (docs/inference.md, "Dry run"): the real InferenceEngine -- the TSP
// prefill of B prompts of S tokens, then greedy decode steps -- over D in-process ranks with
// unbacked trackers and virtual clocks (the training dry run's machinery,
// dryrun/ranks.h). Kernels charge FLOPs (or, with a memory bandwidth, max(FLOPs / rate,
// bytes read / bandwidth)); messages charge alpha + bytes / beta. No checkpoint is read: the
// weights are unbacked, and greedy sampling on unbacked logits draws id 0 (sampling.h).
//
//   InferDryRunReport r = infer_dry_run(model_preset("7b"), 8,
//                                       {.prompt_tokens = 32768, .batch = 4, .new_tokens = 16});
//   r.prefill_s; r.decode_token_s; r.prefill[0].memory.peak[...]; r.decode[0].comm_total;
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "origami/comm/link_model.h"
#include "origami/core/precision.h"
#include "origami/dryrun/rank_figures.h"
#include "origami/model/config.h"
#include "origami/parallel/layout.h"

namespace origami::infer {

struct InferDryRunOptions {
  std::int64_t prompt_tokens = 4096;  // S: every prompt's length (padded as the engine pads)
  std::int64_t batch = 1;             // B prompts
  // As generate's --max-new-tokens: the prefill draws the first, new_tokens - 1 decode steps
  // the rest; the cache reserves S + new_tokens positions.
  std::int64_t new_tokens = 2;
  parallel::TokenLayoutKind layout = parallel::TokenLayoutKind::Zigzag;
  Precision precision = Precision::fp32();
  double flop_rate = 100e12;  // FLOP/s of one rank
  double memory_bw = 0;       // bytes/s of one rank's memory (0: FLOPs only)
  comm::LinkModel link;       // alpha, beta per link class ("enabled" ignored)
  std::optional<std::int64_t> memory_cap;  // per rank: OutOfBudget naming the category
};

struct InferDryRunReport {
  // Per rank (axis rank order), one entry per phase. prefill: the tracker's peaks from the
  // engine's construction to the end of prefill (parameters resident), the traffic of the
  // prefill call (the first token's sampling excluded), step_s = its virtual time. decode: the
  // peaks and traffic of every decode step with its sampling, step_s = the mean step.
  std::vector<DryRunRank> prefill, decode;
  double prefill_s = 0;       // the slowest rank's prefill
  double decode_token_s = 0;  // the slowest rank's mean decode step (one token per sequence,
                              // its sampling included)
  std::int64_t decode_steps = 0;
  std::int64_t batch = 0;
  std::int64_t prefill_length = 0;  // S as padded
  std::string describe;             // e.g. "tsp=8, B 4 x S 32768, 16 new tokens, bf16"
  std::string summary() const;
  std::string to_json() const;
};

// ConfigError (naming the option) for a bad shape, a degree the model refuses (TSP: D divides
// heads, kv heads and the MLP width), or prompt + new tokens beyond max_position_embeddings.
InferDryRunReport infer_dry_run(const ModelConfig& model, int degree,
                                const InferDryRunOptions& options);

}  // namespace origami::infer
