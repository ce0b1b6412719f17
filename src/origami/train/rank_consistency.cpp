#include "origami/train/rank_consistency.h"

#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "origami/checkpoint/checkpoint.h"
#include "origami/core/error.h"

namespace origami {

namespace {

// The hash of a source's tokens as stored: all of them up to 64 MiB; beyond, 1 MiB at each
// end and 62 evenly spaced 64 KiB pieces, so that W ranks of a host do not each read a large
// file through (the token count beside it tells files of other sizes apart).
std::uint64_t tokens_hash(const data::TokenView& t) {
  static constexpr std::size_t kWhole = 64u << 20, kEnd = 1u << 20, kPiece = 64u << 10;
  static constexpr int kPieces = 62;
  const auto bytes = static_cast<std::size_t>(t.count) * static_cast<std::size_t>(t.width);
  if (bytes <= kWhole) return ckpt::fnv1a64(t.data, bytes);
  std::vector<std::uint64_t> parts = {ckpt::fnv1a64(t.data, kEnd),
                                      ckpt::fnv1a64(t.data + bytes - kEnd, kEnd)};
  for (int k = 0; k < kPieces; ++k) {
    const std::size_t at = kEnd + (bytes - 2 * kEnd - kPiece) / (kPieces - 1) * static_cast<std::size_t>(k);
    parts.push_back(ckpt::fnv1a64(t.data + at, kPiece));
  }
  return ckpt::fnv1a64(parts.data(), parts.size() * sizeof(parts[0]));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> agreed_fields(const TrainOptions& o,
                                                               const data::TokenDataset& data) {
  std::string fingerprint;
  for (const data::TokenSource& s : data.sources())
    fingerprint += fmt::format("{}{} tokens of {} bytes, weight {}, fnv1a64 {:016x}",
                               fingerprint.empty() ? "" : "; ", s.tokens.count, s.tokens.width,
                               s.weight, tokens_hash(s.tokens));
  // What decides the model, the batches, the schedule, the layout and the checkpoints.
  // (--threads, --metrics and --peak-gflops are a rank's own.)
  return {{"--config/--model", model_config_to_json(o.model)},
          {"--data", fingerprint},
          {"--data-dtype", o.data_dtype},
          {"--data-order", o.data_order},
          {"--document-masking", o.document_masking ? "on" : "off"},
          {"--eos-id", std::to_string(o.eos_id)},
          {"--seq", std::to_string(o.seq)},
          {"--batch", std::to_string(o.batch)},
          {"--grad-accum", std::to_string(o.grad_accum)},
          {"--global-batch", std::to_string(o.global_batch)},
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
          {"--tsp-schedule", o.tsp_schedule},
          {"--moe-schedule", o.moe_schedule},
          {"--pp-layers", o.pp_layers},
          {"--pp-virtual", std::to_string(o.pp_virtual)},
          {"--layout", o.layout},
          {"--recompute", o.recompute},
          {"--shard-optimizer", o.shard_optimizer ? "on" : "off"},
          {"--precision", o.precision},
          {"--grad-reduce-dtype", o.grad_reduce_dtype},
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
