// Why nothing fits, in a sentence: when no layout of the devices fits their memory, the layout
// closest to fitting (the feasible row of the smallest per-device total), its largest memory
// category, and what would make a layout fit — each remedy computed by predicting the plan
// again with it applied, never canned. The remedies searched: full recompute, bf16 mixed
// precision, pipeline stages (--pp all, when the rows had none), more devices (2x, 4x, 8x the
// world), a shorter sequence. (--shard-optimizer is named in the sentence but not yet
// searched.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "origami/plan/layouts.h"

namespace origami::plan {

struct Remedy {
  std::string change;  // the flag(s) to change, e.g. "--recompute full" or "--seq 65536"
  Layout layout;       // the fastest layout that then fits
  std::int64_t total_bytes = 0;  // its per-device total
};

struct NoFitAdvice {
  Layout closest;
  std::int64_t closest_bytes = 0;
  std::string largest_category;
  std::int64_t largest_bytes = 0;
  std::vector<Remedy> remedies;  // each one, applied alone, fits (checked)
  // The closest layout's parameters + gradients + optimizer state, and the largest
  // weight-sharding degree (tp or tsp) any feasible layout reached: when the states alone
  // exceed the device, only sharding them further can fit, which the sentence says.
  std::int64_t states_bytes = 0;
  int widest_weight_sharding = 1;
  // "sequence 131072 fits no layout of 64 devices of 79.65 GiB: the closest, L, needs X
  // (largest: C); with --recompute full, L' fits in Y, or with ..."
  std::string sentence(int world, std::int64_t seq, const Hardware& hw) const;
};

// nullopt when some row fits or no row is feasible at all (the caller says why per row).
std::optional<NoFitAdvice> explain_no_fit(const ModelConfig& m, int world, const Workload& w,
                                          const Hardware& hw, const std::vector<PlanRow>& rows);

// A layout as sentences name it: "tp-sp+sp (dp=1 tp=8 (sequence-parallel regions) sp=8 zigzag)".
std::string layout_words(const Layout& l);

}  // namespace origami::plan
