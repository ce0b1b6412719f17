#include "origami/train/batch_size.h"

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami {

namespace {

// micro-batch x dp x grad-accum, refused beyond 2^62 sequences (no run draws that many, and
// the product must not overflow).
std::int64_t global_of(std::int64_t batch, std::int64_t dp, std::int64_t accum) {
  constexpr std::int64_t kMax = std::int64_t{1} << 62;
  if (batch > kMax / dp || batch * dp > kMax / accum)
    throw ConfigError(fmt::format("--micro-batch {} x dp {} x --grad-accum {} is beyond 2^62 "
                                  "sequences per step; use smaller values",
                                  batch, dp, accum));
  return batch * dp * accum;
}

// The smallest multiple of `unit` not below `n` (a --global-batch that would work).
std::int64_t multiple_at_least(std::int64_t n, std::int64_t unit) {
  return (n + unit - 1) / unit * unit;
}

}  // namespace

std::string resolve_global_batch(TrainOptions& o, int dp) {
  const std::int64_t G = o.global_batch;
  if (o.batch < 1)
    throw ConfigError(fmt::format("--batch (--micro-batch) must be at least 1 (got {})", o.batch));
  if (o.grad_accum < 1)
    throw ConfigError(fmt::format("--grad-accum must be at least 1 (got {})", o.grad_accum));
  if (G < 0)
    throw ConfigError(fmt::format("--global-batch must be at least 1 (got {})", G));
  if (G == 0) {
    o.global_batch = global_of(o.batch, dp, o.grad_accum);
    return "";
  }
  o.global_batch_fixed = true;
  if (o.batch_fixed && o.grad_accum_fixed) {
    const std::int64_t have = global_of(o.batch, dp, o.grad_accum);
    if (have != G)
      throw ConfigError(fmt::format(
          "--global-batch {} contradicts --micro-batch {} x dp {} x --grad-accum {} = {}; give "
          "two of the three (global batch = micro-batch x dp x grad-accum), or --global-batch {}",
          G, o.batch, dp, o.grad_accum, have, have));
    return "";
  }
  if (o.batch_fixed) {
    const std::int64_t unit = global_of(o.batch, dp, 1);
    if (G % unit != 0)
      throw ConfigError(fmt::format(
          "--global-batch {} is not a whole number of steps of --micro-batch {} x dp {} = {} "
          "sequences: use --global-batch {} (or a --micro-batch that divides {} / dp)",
          G, o.batch, dp, unit, multiple_at_least(G, unit), G));
    o.grad_accum = G / unit;
    return fmt::format("--global-batch {}: --grad-accum {} (--micro-batch {} x dp {} x {})", G,
                       o.grad_accum, o.batch, dp, o.grad_accum);
  }
  // The micro-batch is derived; grad-accum stays (1 unless given).
  const std::int64_t unit = global_of(1, dp, o.grad_accum);
  if (G % unit != 0)
    throw ConfigError(fmt::format(
        "--global-batch {} does not split over dp {} x --grad-accum {} = {}: use --global-batch "
        "{}, or give --micro-batch and let grad-accum follow",
        G, dp, o.grad_accum, unit, multiple_at_least(G, unit)));
  o.batch = G / unit;
  return fmt::format("--global-batch {}: --micro-batch {} per replica (x dp {} x --grad-accum {})",
                     G, o.batch, dp, o.grad_accum);
}

std::int64_t saved_global_batch(const nlohmann::json& run) {
  if (run.contains("global_batch")) return run.at("global_batch").get<std::int64_t>();
  return run.at("batch").get<std::int64_t>() * run.at("grad_accum").get<std::int64_t>();
}

std::string keep_saved_global_batch(TrainOptions& o, int dp, const nlohmann::json& run,
                                    const std::string& dir) {
  const std::int64_t saved = saved_global_batch(run);
  if (saved == o.global_batch) return "";
  const std::string was =
      run.contains("dp")
          ? fmt::format("global batch {} (micro-batch {} x dp {} x grad-accum {})", saved,
                        run.at("batch").get<std::int64_t>(), run.at("dp").get<std::int64_t>(),
                        run.at("grad_accum").get<std::int64_t>())
          : fmt::format("global batch {}", saved);
  const std::string now = fmt::format("--micro-batch {} x dp {} x --grad-accum {} = {}", o.batch,
                                      dp, o.grad_accum, o.global_batch);
  auto refuse = [&](const std::string& why) {
    return ConfigError(fmt::format("{}: saved with {}, this run has {}; a resumed run keeps the "
                                   "global batch, and {} (use --init-from to start afresh)",
                                   dir, was, now, why));
  };
  if (o.global_batch_fixed)
    throw refuse(fmt::format("--global-batch {} was given: give --global-batch {}",
                             o.global_batch, saved));
  // Adjusting grad-accum first keeps the micro-batch, so the memory per device stays.
  if (!o.grad_accum_fixed && saved % (o.batch * dp) == 0) {
    o.grad_accum = saved / (o.batch * dp);
    o.global_batch = saved;
    return fmt::format("resuming {} under dp {}: --grad-accum {} keeps the saved global batch {}",
                       dir, dp, o.grad_accum, saved);
  }
  if (!o.batch_fixed && saved % (std::int64_t{dp} * o.grad_accum) == 0) {
    o.batch = saved / (std::int64_t{dp} * o.grad_accum);
    o.global_batch = saved;
    return fmt::format("resuming {} under dp {}: --micro-batch {} keeps the saved global batch {}",
                       dir, dp, o.batch, saved);
  }
  if (!o.batch_fixed && !o.grad_accum_fixed && saved % dp == 0) {
    o.batch = saved / dp;
    o.grad_accum = 1;
    o.global_batch = saved;
    return fmt::format("resuming {} under dp {}: --micro-batch {} and --grad-accum 1 keep the "
                       "saved global batch {}",
                       dir, dp, o.batch, saved);
  }
  if (saved % dp != 0)
    throw refuse(fmt::format("{} sequences do not split over dp {}: resume with a dp that "
                             "divides {}",
                             saved, dp, saved));
  // dp divides it but a fixed flag is in the way: name the values that work.
  if (o.batch_fixed && o.grad_accum_fixed)
    throw refuse(fmt::format("--micro-batch and --grad-accum are both given: drop one, or give "
                             "--micro-batch x --grad-accum = {}",
                             saved / dp));
  if (o.batch_fixed)
    throw refuse(fmt::format("--micro-batch {} does not divide {} / dp {} = {}: give a "
                             "--micro-batch that does, e.g. 1 with --grad-accum {}",
                             o.batch, saved, dp, saved / dp, saved / dp));
  throw refuse(fmt::format("--grad-accum {} does not divide {} / dp {} = {}: give a --grad-accum "
                           "that does, e.g. 1 with --micro-batch {}",
                           o.grad_accum, saved, dp, saved / dp, saved / dp));
}

}  // namespace origami
