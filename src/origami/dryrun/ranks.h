// The dry run's ranks, shared by the training step (dryrun/training.h) and inference
// (dryrun/inference.h): in-process ranks with unbacked trackers sized by a precision profile, a
// virtual clock installed on each rank's thread (FLOP rate, optional memory bandwidth), and
// the threads transport in virtual-time mode under the link model. What the reports print of
// each rank is dryrun/rank_figures.h.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "origami/comm/communicator.h"
#include "origami/comm/link_model.h"
#include "origami/core/dry_run.h"
#include "origami/core/precision.h"

namespace origami {

struct DryRunMachine {
  Precision precision = Precision::fp32();
  double flop_rate = 100e12;  // FLOP/s of one rank
  double memory_bw = 0;       // bytes/s of one rank's memory (0: kernels charge FLOPs only)
  comm::LinkModel link;       // "enabled" ignored: a dry run always uses it
  std::optional<std::int64_t> memory_cap;
  bool execute = false;  // backed memory, kernels computed, no clocks (what tests compare with)
  // ConfigError for a non-positive rate, a negative bandwidth or a bad link.
  void validate() const;
};

// Runs fn(world, clock) on `world` in-process ranks as the machine describes; each rank's
// thread carries `clock` (not installed when execute). Blocks until every rank returns.
using DryRankFn = std::function<void(comm::Communicator&, dryrun::Clock&)>;
void run_dry_ranks(int world, const DryRunMachine& machine, const DryRankFn& fn);

}  // namespace origami
