#include "origami/dryrun/ranks.h"

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "origami/comm/run_ranks.h"
#include "origami/core/error.h"

namespace origami {

void DryRunMachine::validate() const {
  if (!(flop_rate > 0))
    throw ConfigError(fmt::format("the FLOP rate must be > 0, got {}", flop_rate));
  if (!(memory_bw >= 0))
    throw ConfigError(
        fmt::format("the memory bandwidth must be >= 0 bytes/s (0: off), got {}", memory_bw));
  comm::LinkModel l = link;
  l.enabled = true;
  l.validate();
}

void run_dry_ranks(int world, const DryRunMachine& machine, const DryRankFn& fn) {
  machine.validate();
  std::vector<std::unique_ptr<MemoryTracker>> owned;
  std::vector<MemoryTracker*> trackers;
  for (int r = 0; r < world; ++r) {
    owned.push_back(std::make_unique<MemoryTracker>(fmt::format("rank {}", r)));
    owned.back()->set_cap(machine.memory_cap);
    if (!machine.execute) {
      owned.back()->set_backs_memory(false);
      machine.precision.apply_to(*owned.back());
    }
    trackers.push_back(owned.back().get());
  }
  comm::RunOptions ro;
  if (!machine.execute) {
    ro.link = machine.link;
    ro.link.enabled = true;
    ro.virtual_time = true;
  }
  comm::run_ranks(
      trackers,
      [&](comm::Communicator& c) {
        dryrun::Clock clock;
        clock.flop_rate = machine.flop_rate;
        clock.mem_bw_Bps = machine.memory_bw;
        clock.elem_bytes = machine.precision.activations;
        clock.comm_elem_bytes = machine.precision.communication;
        clock.grad_elem_bytes = machine.precision.gradients;
        const dryrun::Install installed(machine.execute ? nullptr : &clock);
        fn(c, clock);
      },
      ro);
}

}  // namespace origami
