// What a dry run reports of each rank (training, dryrun/training.h; inference,
// dryrun/inference.h): peaks by category, bytes per communicator and operation, virtual times,
// and the tables and JSON that print them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "origami/comm/communicator.h"
#include "origami/comm/stats.h"
#include "origami/core/dry_run.h"
#include "origami/core/memory_tracker.h"

namespace origami {

struct DryRunRank {
  MemoryStats memory;  // peak (and final current) bytes per category, as the tracker names them
  // Per communicator of the rank, by its name ("world", the mesh axes "dp", "tp", "sp", "tsp"
  // and the strategies' own, e.g. TSP's "tsp-shards"; communicators with no
  // traffic are left out): calls and bytes per kind of operation over the whole run (building
  // the groups included).
  std::map<std::string, comm::CommStats> comm;
  comm::CommStats comm_total;  // the same summed over the axes, per kind
  double clock_s = 0;          // virtual clock at the end of the run
  double step_s = 0;           // virtual duration of the last step on this rank
  double compute_s = 0;        // part of clock_s charged by kernels
  double flops = 0;            // FLOPs charged by kernels
  double attention_flops = 0;  // of which by the training attention kernels (with packed
                               // documents: their visible pairs only)
};

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
