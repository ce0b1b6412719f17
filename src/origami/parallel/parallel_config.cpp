#include "origami/parallel/parallel_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "origami/core/error.h"

namespace origami::parallel {

TspSchedule parse_tsp_schedule(const std::string& word) {
  if (word == "broadcast-ring") return TspSchedule::BroadcastRing;
  if (word == "allgather") return TspSchedule::Allgather;
  throw ConfigError(fmt::format("--tsp-schedule '{}' is not a TSP schedule; use broadcast-ring "
                                "(the default) or allgather",
                                word));
}

const char* tsp_schedule_name(TspSchedule s) {
  return s == TspSchedule::Allgather ? "allgather" : "broadcast-ring";
}

MoeSchedule parse_moe_schedule(const std::string& word) {
  if (word == "ring") return MoeSchedule::Ring;
  if (word == "expert") return MoeSchedule::Expert;
  throw ConfigError(fmt::format("--moe-schedule '{}' is not a schedule of TSP's experts; use "
                                "ring (the default) or expert",
                                word));
}

const char* moe_schedule_name(MoeSchedule s) {
  return s == MoeSchedule::Expert ? "expert" : "ring";
}

std::string ParallelConfig::mesh_spec() const {
  const std::string stages = pp > 1 ? fmt::format("pp={},", pp) : std::string();
  return stages + (is_tsp() ? fmt::format("dp={},tsp={},tp={}", dp, tsp, tp)
                            : fmt::format("dp={},sp={},tp={}", dp, sp, tp));
}

std::string ParallelConfig::describe() const {
  const std::string layout_word =
      token_degree() > 1 ? fmt::format(" {}", token_layout_name(layout)) : std::string();
  // The stages first (the outermost axis); the split only when given (else the balanced
  // default of pipeline_stages.h, which needs the model's layer count).
  std::vector<std::string> notes;
  if (pp_virtual > 1) notes.push_back(fmt::format("virtual {}", pp_virtual));
  if (!pp_layers.empty()) notes.push_back(fmt::format("layers {}", fmt::join(pp_layers, ",")));
  const std::string stages =
      pp <= 1        ? std::string()
      : notes.empty() ? fmt::format("pp={} ", pp)
                      : fmt::format("pp={} ({}) ", pp, fmt::join(notes, ", "));
  if (is_tsp())
    return fmt::format("{}dp={} tsp={}{}{}{}", stages, dp, tsp, layout_word,
                       tsp_schedule == TspSchedule::Allgather ? " allgather" : "",
                       moe_schedule == MoeSchedule::Expert ? " expert-parallel moe" : "");
  return fmt::format("{}dp={} tp={}{} sp={}{}", stages, dp, tp,
                     sequence_parallel ? " (sequence-parallel regions)" : "", sp, layout_word);
}

ParallelGroups::ParallelGroups(comm::Communicator world, const ParallelConfig& plan)
    : plan_(plan), mesh_(std::move(world), plan.mesh_spec()) {}

comm::Communicator& ParallelGroups::pp() {
  ORIGAMI_CHECK(plan_.pp > 1, "the plan {} has no pp axis (no pipeline stages)", plan_.describe());
  return mesh_.axis("pp");
}

comm::Communicator& ParallelGroups::sp() {
  ORIGAMI_CHECK(!plan_.is_tsp(), "a TSP plan has no sp axis (its token axis is tsp)");
  return mesh_.axis("sp");
}

comm::Communicator& ParallelGroups::tsp() {
  ORIGAMI_CHECK(plan_.is_tsp(), "the plan {} has no tsp axis", plan_.describe());
  return mesh_.axis("tsp");
}

comm::Communicator& ParallelGroups::axis(const std::string& name) {
  if (kv_replicas_ && name == kv_name_) return *kv_replicas_;
  return mesh_.axis(name);
}

void ParallelGroups::split_kv_replicas(int replicas) {
  if (replicas <= 1 || kv_replicas_) return;
  const std::string weight_axis = plan_.is_tsp() ? "tsp" : "tp";
  comm::Communicator& w = mesh_.axis(weight_axis);
  ORIGAMI_CHECK(w.size() % replicas == 0, "{} kv replicas on a {} axis of {}", replicas,
                weight_axis, w.size());
  kv_name_ = weight_axis + "-kv";
  kv_replicas_ = std::make_unique<comm::Communicator>(
      w.split(w.rank() / replicas, w.rank(), kv_name_));
}

}  // namespace origami::parallel
