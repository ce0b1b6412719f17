#include "origami/dryrun/inference.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "origami/core/error.h"
#include "origami/dryrun/rank_figures.h"
#include "origami/dryrun/ranks.h"
#include "origami/infer/engine.h"
#include "origami/infer/sampling.h"
#include "origami/parallel/layout.h"

namespace origami::infer {

namespace {

// Deterministic prompt ids: the schedule depends on the shape only, except the embedding's
// all-to-alls, which move the rows each id's owner looks up (ids spread over the vocabulary).
std::vector<std::vector<std::int32_t>> synthetic_prompts(std::int64_t B, std::int64_t S,
                                                         std::int64_t vocab) {
  std::vector<std::vector<std::int32_t>> prompts(static_cast<std::size_t>(B));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < S; ++i)
      prompts[static_cast<std::size_t>(b)].push_back(
          static_cast<std::int32_t>((b * S + i) * 7919 % vocab));
  return prompts;
}

void run_rank(const ModelConfig& model, const InferDryRunOptions& o,
              const std::vector<std::vector<std::int32_t>>& prompts, comm::Communicator& world,
              dryrun::Clock& clock, DryRunRank& prefill, DryRunRank& decode,
              std::int64_t& padded) {
  MemoryTracker& tracker = world.tracker();
  InferenceEngine e(model, world, tracker, o.layout);
  const SamplingOptions greedy;
  const std::int64_t B = o.batch, steps = o.new_tokens - 1;
  world.barrier();  // every rank starts the prefill at the same virtual time (as generate)
  const auto before = comm_by_name(world);
  const double t0 = clock.now_s;
  const Tensor* logits = &e.prefill(prompts, o.new_tokens);
  padded = e.prefill_length();
  fill_rank_figures(tracker.stats(), comm_since(before, comm_by_name(world)), clock, prefill);
  prefill.step_s = clock.now_s - t0;
  std::vector<std::int32_t> tok = sample_tokens(e.axis(), logits->f32(), B, e.vocab(), greedy, 0);
  tracker.reset_peaks();
  const auto after_prefill = comm_by_name(world);
  const double t1 = clock.now_s;
  for (std::int64_t t = 1; t <= steps; ++t) {
    logits = &e.decode(tok);
    tok = sample_tokens(e.axis(), logits->f32(), B, e.vocab(), greedy, t);
  }
  fill_rank_figures(tracker.stats(), comm_since(after_prefill, comm_by_name(world)), clock, decode);
  decode.step_s = steps > 0 ? (clock.now_s - t1) / static_cast<double>(steps) : 0.0;
  // The phase's own compute: the whole run's minus the prefill's (fill_rank_figures took the
  // clock's totals).
  decode.compute_s -= prefill.compute_s;
  decode.flops -= prefill.flops;
}

}  // namespace

InferDryRunReport infer_dry_run(const ModelConfig& model, int degree,
                                const InferDryRunOptions& o) {
  validate(model);
  refuse_mixture_of_experts(model, "inference");
  if (degree < 1) throw ConfigError(fmt::format("--degree {} must be >= 1", degree));
  if (o.prompt_tokens < 1 || o.batch < 1)
    throw ConfigError(fmt::format("--prompt-tokens {} and --batch {} must be >= 1",
                                  o.prompt_tokens, o.batch));
  if (o.new_tokens < 1)
    throw ConfigError(fmt::format("--max-new-tokens {} must be >= 1", o.new_tokens));
  if (o.prompt_tokens + o.new_tokens > model.max_position_embeddings)
    throw ConfigError(fmt::format(
        "--prompt-tokens {} + --max-new-tokens {} exceeds the model's max_position_embeddings "
        "{}: shorten the prompt or lower --max-new-tokens",
        o.prompt_tokens, o.new_tokens, model.max_position_embeddings));
  check_inference_degree(model, degree);
  const DryRunMachine machine{.precision = o.precision,
                              .flop_rate = o.flop_rate,
                              .memory_bw = o.memory_bw,
                              .link = o.link,
                              .memory_cap = o.memory_cap,
                              .execute = false};
  machine.validate();
  const auto prompts = synthetic_prompts(o.batch, o.prompt_tokens, model.vocab_size);
  InferDryRunReport r;
  r.prefill.resize(static_cast<std::size_t>(degree));
  r.decode.resize(static_cast<std::size_t>(degree));
  std::int64_t padded = 0;
  run_dry_ranks(degree, machine, [&](comm::Communicator& c, dryrun::Clock& clock) {
    const auto k = static_cast<std::size_t>(c.rank());
    std::int64_t S = 0;
    run_rank(model, o, prompts, c, clock, r.prefill[k], r.decode[k], S);
    if (k == 0) padded = S;
  });
  for (const DryRunRank& k : r.prefill) r.prefill_s = std::max(r.prefill_s, k.step_s);
  for (const DryRunRank& k : r.decode) r.decode_token_s = std::max(r.decode_token_s, k.step_s);
  r.decode_steps = o.new_tokens - 1;
  r.batch = o.batch;
  r.prefill_length = padded;
  r.describe = fmt::format("tsp={}, B {} x S {}, {} new tokens, {}", degree, o.batch,
                           o.prompt_tokens, o.new_tokens, o.precision.name);
  return r;
}

std::string InferDryRunReport::summary() const {
  std::string out = fmt::format("prefill ({}):\n", describe) + rank_tables(prefill, "prefill");
  out += fmt::format("prefill time {:.6f} s (slowest rank), prompts padded to {} tokens\n",
                     prefill_s, prefill_length);
  if (decode_steps > 0) {
    out += fmt::format("decode ({} steps):\n", decode_steps) +
           rank_tables(decode, "mean decode step");
    out += fmt::format("decode time per token {:.6f} s (slowest rank), {:.1f} tokens/s\n",
                       decode_token_s,
                       decode_token_s > 0 ? static_cast<double>(batch) / decode_token_s : 0.0);
  }
  return out;
}

std::string InferDryRunReport::to_json() const {
  nlohmann::json j;
  j["run"] = describe;
  j["prefill_s"] = prefill_s;
  j["decode_token_s"] = decode_token_s;
  j["decode_steps"] = decode_steps;
  for (const auto& [name, ranks] : {std::pair{"prefill", &prefill}, std::pair{"decode", &decode}}) {
    j[name] = nlohmann::json::array();
    for (const DryRunRank& k : *ranks) j[name].push_back(rank_json(k));
  }
  return j.dump(2);
}

}  // namespace origami::infer
