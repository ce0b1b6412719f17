// The engine's dry run (docs/design.md §10, docs/planner.md "Dry run"): the real training step of
// any strategy over in-process ranks, with every fp32 tensor above a few hundred elements
// accounted but not backed, kernels skipped (their FLOPs charged to a per-rank virtual clock
// at a given rate), and messages matched and accounted but not copied (each hop advancing the
// virtual clocks by alpha + bytes / beta of its link class). The same code runs as in a real
// run: there is no second copy of any schedule.
//
//   DryRunReport r = dry_run(model_preset("7b"), parallel::make_parallel_config("tsp", 8, ...),
//                            {.seq = 131072, .precision = Precision::bf16()});
//   r.ranks[0].memory.peak[...]; r.ranks[0].comm_total.op("all_gather").bytes_sent; r.step_s;
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "origami/comm/link_model.h"
#include "origami/core/memory_tracker.h"
#include "origami/core/precision.h"
#include "origami/dryrun/rank_figures.h"
#include "origami/model/config.h"
#include "origami/parallel/parallel_config.h"
#include "origami/parallel/registry.h"

namespace origami::data {
class TokenDataset;
}

namespace origami {

struct DryRunOptions {
  std::int64_t seq = 4096;         // tokens per sequence
  std::int64_t batch = 1;          // micro-batch of each dp replica (sequences): the job's
                                   // micro-batch is batch x dp
  std::int64_t grad_accum = 1;     // micro-batches per optimizer step
  std::int64_t steps = 1;          // optimizer steps; the report's step time is the last one's
  std::string recompute = "none";  // none | mlp | full
  bool shard_optimizer = false;    // AdamW's state over dp (ZeRO-1, model/optimizer.h)
  Precision precision = Precision::fp32();
  double flop_rate = 100e12;  // FLOP/s of one rank (gemm and attention FLOPs are charged)
  // Bytes/s of one rank's memory; 0 (default): off, kernels charge FLOPs only. When set, a GEMM
  // or attention forward charges max(FLOPs / flop_rate, operand bytes read / memory_bw), the
  // operands at the profile's activation size (docs/dry-run.md, "Memory bandwidth").
  double memory_bw = 0;
  comm::LinkModel link;       // alpha, beta per link class, devices per node ("enabled" ignored)
  std::uint64_t seed = 1234;
  // Per-rank cap on the accounted bytes: a rank that would exceed it fails with OutOfBudget
  // naming the category (does the layout fit a device of this size?).
  std::optional<std::int64_t> memory_cap;
  // Run the same path for real (backed memory, kernels computed, bytes copied, no clocks):
  // what the tests compare the dry run with. Needs fp32 and a model that fits.
  bool execute = false;
  // The rows to train on (`train --dry-run --document-masking --data PREFIX`): each replica
  // reads its rows of every micro-batch from it as a real run does (same seed, same batch
  // index), with their documents, so the attention kernels charge the documents' visible pairs
  // and the balanced layout assigns by them. Null: synthetic rows, one causal document each
  // (the data does not change the schedule, only the masked work). Must outlive the call.
  const data::TokenDataset* data = nullptr;
};


struct DryRunReport {
  std::vector<DryRunRank> ranks;  // world rank order
  double step_s = 0;              // the last step's virtual time: the slowest rank's
  double tokens_per_s = 0;        // batch * dp * seq * grad_accum / step_s (the whole cluster)
  std::string describe;           // the plan, e.g. "tsp=8"
  // A human-readable table: peak by category per rank, bytes per op kind, step time.
  std::string summary() const;
  std::string to_json() const;
};

// Refuses (ConfigError) what validate_plan refuses, a bad precision/recompute, or a
// non-positive rate, before any rank starts.
DryRunReport dry_run(const ModelConfig& model, const parallel::ParallelConfig& plan,
                     const DryRunOptions& options);

}  // namespace origami
