// Enumerating the layouts of N devices and searching the longest sequence a layout fits: the
// rows `origami plan` prints (strategy x mesh factorisation x DP).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "origami/parallel/registry.h"
#include "origami/plan/predict.h"

namespace origami::plan {

// The layouts (parallel::enumerate_meshes) and their names (parallel::family_name) come from
// the strategy registry.

// A row of the plan: the layout and its prediction, or why the engine would refuse it.
struct PlanRow {
  Layout layout;
  std::string error;  // empty when feasible
  Prediction prediction;
  std::int64_t max_seq = 0;  // longest sequence that fits (0: none; searched by the caller)
  bool recommended = false;
};

// Predicts every layout; infeasible ones carry the reason. Sorted: fitting rows by tokens/s
// (highest first; the micro-batch is per dp replica, so step times of different dp are not
// comparable), then feasible rows that do not fit by total memory, then infeasible rows.
// The first fitting row is marked recommended. Each TSP layout is predicted once per schedule
// of `tsp_schedules` (broadcast-ring alone by default; with allgather too, its rows beside).
// Each degree of `pp_degrees` (1 alone by default) cuts the world into that many pipeline
// stages (balanced layers, one chunk a stage, 1F1B over w.grad_accum micro-batches), every
// layout of world / pp devices within a stage.
std::vector<PlanRow> plan_rows(const ModelConfig& m, int world, const Workload& w,
                               const Hardware& hw,
                               const std::vector<parallel::TspSchedule>& tsp_schedules =
                                   {parallel::TspSchedule::BroadcastRing},
                               const std::vector<int>& pp_degrees = {1});

// The pp degrees of a search over `world` devices: every divisor of world up to the model's
// layers (1 included).
std::vector<int> pipeline_degrees(int world, std::int64_t layers);

// The longest sequence (a multiple of the layout's granularity, at most `limit`) whose
// per-device total fits the hardware's memory; nullopt when not even the shortest fits or
// the layout is refused at every length.
std::optional<std::int64_t> longest_sequence(const ModelConfig& m, const Layout& l,
                                             const Workload& w, const Hardware& hw,
                                             std::int64_t limit = std::int64_t{1} << 24);

}  // namespace origami::plan
