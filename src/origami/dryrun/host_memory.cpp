#include "origami/dryrun/host_memory.h"

#include <optional>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/core/memory_tracker.h"
#include "origami/train/memory_check.h"

namespace origami {

void check_dry_run_host_memory(std::int64_t seq, std::int64_t batch, int world) {
  constexpr double kBytesPerTokenAndRank = 64;
  const double need = static_cast<double>(seq) * static_cast<double>(batch) *
                      static_cast<double>(world) * kBytesPerTokenAndRank;
  const std::optional<std::int64_t> free = available_memory_bytes();
  if (free && need > static_cast<double>(*free))
    throw ConfigError(fmt::format(
        "dry run of --seq {} x --batch {} on {} ranks: its token ids, labels and positions are "
        "held for real, about {:.3g} GiB, more than this machine's available {}; use a shorter "
        "--seq (the planner, `origami plan`, answers for any length)",
        seq, batch, world, need / (1024.0 * 1024 * 1024), format_bytes(*free)));
}

}  // namespace origami
