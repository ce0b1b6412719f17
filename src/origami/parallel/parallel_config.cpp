#include "origami/parallel/parallel_config.h"

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::parallel {

std::string ParallelConfig::mesh_spec() const {
  return is_tsp() ? fmt::format("dp={},tsp={},tp={}", dp, tsp, tp)
                  : fmt::format("dp={},sp={},tp={}", dp, sp, tp);
}

std::string ParallelConfig::describe() const {
  const std::string layout_word =
      token_degree() > 1 ? fmt::format(" {}", token_layout_name(layout)) : std::string();
  if (is_tsp()) return fmt::format("dp={} tsp={}{}", dp, tsp, layout_word);
  return fmt::format("dp={} tp={}{} sp={}{}", dp, tp,
                     sequence_parallel ? " (sequence-parallel regions)" : "", sp, layout_word);
}

ParallelGroups::ParallelGroups(comm::Communicator world, const ParallelConfig& plan)
    : plan_(plan), mesh_(std::move(world), plan.mesh_spec()) {}

comm::Communicator& ParallelGroups::sp() {
  ORIGAMI_CHECK(!plan_.is_tsp(), "a TSP plan has no sp axis (its token axis is tsp)");
  return mesh_.axis("sp");
}

comm::Communicator& ParallelGroups::tsp() {
  ORIGAMI_CHECK(plan_.is_tsp(), "the plan {} has no tsp axis", plan_.describe());
  return mesh_.axis("tsp");
}

}  // namespace origami::parallel
