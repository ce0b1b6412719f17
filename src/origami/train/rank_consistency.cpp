#include "origami/train/rank_consistency.h"

#include <cstring>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/train/checkpoint.h"

namespace origami {

std::vector<std::pair<std::string, std::string>> agreed_fields(const TrainOptions& o,
                                                               const data::TokenDataset& data) {
  // Every source's tokens as stored, and its weight (a mapped file is read through once).
  std::string fingerprint;
  for (const data::TokenSource& s : data.sources())
    fingerprint += fmt::format(
        "{}{} tokens of {} bytes, weight {}, fnv1a64 {:016x}", fingerprint.empty() ? "" : "; ",
        s.tokens.count, s.tokens.width, s.weight,
        ckpt::fnv1a64(s.tokens.data, static_cast<std::size_t>(s.tokens.count * s.tokens.width)));
  // What decides the model, the batches, the schedule, the layout and the checkpoints.
  // (--threads, --metrics and --peak-gflops are a rank's own.)
  return {{"--config/--model", model_config_to_json(o.model)},
          {"--data", fingerprint},
          {"--data-dtype", o.data_dtype},
          {"--data-order", o.data_order},
          {"--seq", std::to_string(o.seq)},
          {"--batch", std::to_string(o.batch)},
          {"--grad-accum", std::to_string(o.grad_accum)},
          {"--steps", std::to_string(o.steps)},
          {"--warmup", std::to_string(o.warmup)},
          {"--lr", fmt::format("{}", o.lr)},
          {"--min-lr-ratio", fmt::format("{}", o.min_lr_ratio)},
          {"--weight-decay", fmt::format("{}", o.weight_decay)},
          {"--max-grad-norm", fmt::format("{}", o.max_grad_norm)},
          {"--seed", std::to_string(o.seed)},
          {"--strategy", o.strategy},
          {"--degree", std::to_string(o.degree)},
          {"--mesh", o.mesh},
          {"--tp-sequence-parallel", o.tp_sequence_parallel ? "on" : "off"},
          {"--layout", o.layout},
          {"--recompute", o.recompute},
          {"--save-dir", o.checkpoint.save_dir},
          {"--save-every", std::to_string(o.checkpoint.save_every)},
          {"--resume", o.checkpoint.resume},
          {"--init-from", o.checkpoint.init_from},
          {"--log-every", std::to_string(o.log_every)}};
}

void check_ranks_agree(comm::Communicator& world, const TrainOptions& o,
                       const data::TokenDataset& data) {
  const auto fields = agreed_fields(o, data);
  const std::size_t n = fields.size(), W = static_cast<std::size_t>(world.size());
  std::vector<std::int64_t> mine(n), all(n * W);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t h = ckpt::fnv1a64(fields[i].second.data(), fields[i].second.size());
    std::memcpy(&mine[i], &h, sizeof h);
  }
  world.all_gather(mine, all);
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<int> differ;
    for (std::size_t r = 1; r < W; ++r)
      if (all[r * n + i] != all[i]) differ.push_back(static_cast<int>(r));
    if (differ.empty()) continue;
    const std::string& value = fields[i].second;
    throw ConfigError(fmt::format(
        "{} differs across ranks: world rank(s) {} were started with another value than rank 0 "
        "(this rank, {}, has '{}'); start every rank with the same {}",
        fields[i].first, fmt::join(differ, ", "), world.rank(),
        value.size() > 200 ? value.substr(0, 200) + "..." : value, fields[i].first));
  }
}

}  // namespace origami
