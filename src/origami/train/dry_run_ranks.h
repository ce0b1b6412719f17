// The dry run's machinery shared by the training step (train/dry_run.h) and inference
// (infer/dry_run.h): in-process ranks with unbacked trackers sized by a precision profile, a
// virtual clock installed on each rank's thread (FLOP rate, optional memory bandwidth), the
// threads transport in virtual-time mode under the link model, and the per-rank figures
// (peaks by category, bytes per communicator and operation, virtual times) the reports print.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "origami/comm/communicator.h"
#include "origami/comm/link_model.h"
#include "origami/core/dry_run.h"
#include "origami/core/precision.h"
#include "origami/train/dry_run.h"

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

// This rank's communicators with traffic, by name ("world", "sp", "tsp-shards", ...; a name
// used twice gets "#2"), their calls and bytes per kind so far.
std::map<std::string, comm::CommStats> comm_by_name(comm::Communicator& world);
// after - before, per communicator and kind (the traffic of one phase); empty ones dropped.
std::map<std::string, comm::CommStats> comm_since(const std::map<std::string, comm::CommStats>& before,
                                                  const std::map<std::string, comm::CommStats>& after);
// Fills the figures of `out` from the tracker's stats, the communicators' and the clock's.
void fill_rank_figures(const MemoryStats& memory, std::map<std::string, comm::CommStats> comm,
                       const dryrun::Clock& clock, DryRunRank& out);

// The per-rank tables of DryRunReport::summary (peaks by category, bytes per op, virtual
// communication and exposed time, virtual time per rank); `step` names the ranks' step_s.
std::string rank_tables(const std::vector<DryRunRank>& ranks, const std::string& step);
// One rank's figures as JSON (peaks, current, comm, clock_s, step_s, compute_s, flops).
nlohmann::json rank_json(const DryRunRank& rank);

}  // namespace origami
