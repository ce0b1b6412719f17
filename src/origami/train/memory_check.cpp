#include "origami/train/memory_check.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/core/memory_tracker.h"
#include "origami/plan/cost_model.h"

namespace origami {

std::optional<std::int64_t> available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return std::nullopt;
}

void check_run_memory(const TrainOptions& o, const parallel::ParallelConfig& p, int ranks_here) {
  plan::Workload w;
  w.batch = o.batch;
  w.grad_accum = o.grad_accum;
  w.seq = o.seq;
  w.contiguous = p.layout == parallel::TokenLayoutKind::Contiguous;
  w.recompute = parse_recompute(o.recompute);
  w.shard_optimizer = o.shard_optimizer;
  // The planner has no expert model (docs/moe.md): a mixture of experts is estimated as the
  // dense model holding the same expert weights (intermediate_size E x f), which bounds its
  // saved activations (E x f per token against at most k x f) and its weights but for the
  // routers' E x h per layer (under 1 / (3f) of the experts').
  ModelConfig estimated = model_for_run(o.model, o.seq);
  if (estimated.is_moe()) {
    estimated.intermediate_size *= estimated.num_local_experts;
    estimated.num_local_experts = 0;
  }
  // Either TSP schedule holds 1/D of the experts' weights a rank: the dense model's plan
  // (the expert schedule's choice is no plan of a dense model).
  parallel::ParallelConfig estimated_plan = p;
  estimated_plan.moe_schedule = parallel::MoeSchedule::Ring;
  const plan::Memory m = plan::memory_per_device(estimated, estimated_plan, w);
  const std::vector<std::pair<const char*, std::int64_t>> categories = {
      {"parameters", m.parameters},   {"gradients", m.gradients},
      {"optimizer state", m.optimizer}, {"saved activations", m.activations},
      {"logits", m.logits},           {"communication buffers", m.comm_buffers},
      {"workspace", m.workspace}};
  std::pair<const char*, std::int64_t> largest = categories.front();
  for (const auto& c : categories)
    if (c.second > largest.second) largest = c;
  const std::string estimate =
      fmt::format("the planner estimates {} per rank (largest: {} {})", format_bytes(m.total()),
                  largest.first, format_bytes(largest.second));
  const std::string remedy = "use a smaller model, more ranks, --recompute full, a shorter --seq "
                             "or a smaller --batch";
  if (o.memory_cap && m.total() > *o.memory_cap)
    throw ConfigError(fmt::format("this run does not fit --memory-cap {}: {}; {}",
                                  format_bytes(*o.memory_cap), estimate, remedy));
  const std::optional<std::int64_t> free = available_memory_bytes();
  if (free && m.total() > *free / ranks_here)
    throw ConfigError(fmt::format("this run does not fit this machine's available memory ({} for "
                                  "{} rank(s)): {}; {}",
                                  format_bytes(*free), ranks_here, estimate, remedy));
}

}  // namespace origami
