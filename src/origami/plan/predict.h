// The planner's prediction for one layout, in one call: per-device memory by tracker
// category, bytes each rank sends per operation (by link class), FLOPs, and a step time that
// overlaps what the schedule overlaps (docs/planner.md, "Step time"). This is the call the
// checks against real runs and against the dry run loop over.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "origami/model/config.h"
#include "origami/plan/cost_model.h"
#include "origami/plan/hardware.h"

namespace origami::plan {

using Layout = Mesh;

// Where an axis's ring runs: within a node, across nodes, or both (the ring's slowest hop
// is inter-node). Axes are placed innermost first: tp, tsp, sp, dp, then pp (the outermost:
// a stage boundary joins ranks one stage group, tp·tsp·sp·dp ranks, apart).
enum class LinkClass { Intra, Inter, Mixed };
std::string link_class_name(LinkClass c);  // "intra", "inter", "mixed"
// The class of `axis` ("tp", "tsp", "tsp_shards", "sp", "dp", "pp") for a layout and node size.
LinkClass link_class(const Layout& l, const std::string& axis, int devices_per_node);

// One operation's traffic and time for the rank, per step (grad_accum micro-batches, then the
// step's reductions).
struct CommCost {
  CommOp op;
  bool gradient_reduction = false;  // once per step: weight gradients and scalars
  LinkClass link = LinkClass::Intra;
  double seconds = 0;  // messages·α + bytes/β on the axis's slowest link
  double exposed_s = 0;
};

// One pp rank's share of a step under pipeline stages (docs/planner.md, "Pipeline step
// time"): its chunks' layers, the embedding on stage 0, the head on the last.
struct StagePrediction {
  std::int64_t layers = 0;     // its chunks' decoder layers
  Memory memory;               // memory_of_stage, overhead included
  std::vector<CommCost> comm;  // per step: its blocks' collectives, its tensors' reductions,
                               // the step's scalars and the boundary sends/receives ("pp")
  double model_flops = 0, executed_flops = 0;              // per device of the stage, per step
  double attention_flops = 0, causal_attention_flops = 0;  // as Prediction's, the stage's
  double attention_imbalance = 0, attention_imbalance_worst = 0;  // (the same on every stage)
  double compute_s = 0;       // its executed FLOPs' time, per step
  double exposed_comm_s = 0;  // its blocks' and reductions' exposed time (the sends are on
                              // the pipeline clock)
  // One micro-batch's pass through each of its chunks (local order): compute + exposed comm.
  std::vector<double> forward_s, backward_s;
  std::int64_t boundary_bytes = 0;  // one boundary message, [stream rows, h]: the rank's rows
  LinkClass boundary_link = LinkClass::Intra;  // link_class(layout, "pp")
  double hop_s = 0;                            // one boundary message on that link: α + bytes/β
  double reduction_s = 0;  // the exposed step reductions, after the last micro-batch
  double busy_s = 0;       // grad_accum × its passes + reduction_s: the stage's own step time
};

struct Prediction {
  Memory memory;  // per category; overhead = the hardware's runtime overhead
  std::vector<CommCost> comm;
  std::int64_t comm_bytes_per_step = 0;  // bytes the rank sends per step
  std::int64_t intra_bytes = 0, inter_bytes = 0;
  double model_flops_per_device = 0;     // docs/flops.md, per device and step
  double executed_flops_per_device = 0;  // + the recompute policy's forward re-runs (and the
                                         // TSP head ring's logits recompute)
  // Attention's core products (QK^T and PV: forward, backward, and the forward again under full
  // recompute) per device and step, of the mean device: with Workload::documents the rows'
  // visible pairs (masked), else one causal document per row, which `causal_` always counts.
  double attention_flops_per_device = 0, causal_attention_flops_per_device = 0;
  // With Workload::documents and a layout that splits the sequences (sp, TP+SP, tsp): the
  // ranks' max/mean - 1 of attention work, mean over the sample's micro-batches (and the
  // worst). compute_s charges the slowest rank's attention, (1 + imbalance) x the mean's.
  double attention_imbalance = 0, attention_imbalance_worst = 0;
  double compute_s = 0, comm_s = 0, exposed_comm_s = 0, step_s = 0;
  double tokens_per_s = 0;  // the cluster's
  bool fits = false;        // memory.total() <= the device's memory
  std::int64_t micro_batch = 0;  // sequences per micro-batch of each replica (per_replica)
  // Pipeline stages (layout pp > 1), one entry per pp rank; empty without. The row's figures
  // are then: memory the worst stage's (memory_per_device), communication, FLOPs, compute and
  // exposed time the busiest stage's (largest busy_s), step_s the schedule's critical path
  // (parallel::pipeline_seconds over the stages' passes and boundary hops) plus the slowest
  // stage's step reductions, bubble the clock's idle share of the busiest rank.
  std::vector<StagePrediction> stages;
  double bubble = 0;

  // The tracker's categories with its names (core/memory_tracker.cpp), for the checks.
  std::vector<std::pair<std::string, std::int64_t>> categories() const;
};

// Throws ConfigError (what to change) for a layout the engine would refuse.
Prediction predict(const ModelConfig& m, const Layout& l, const Workload& w, const Hardware& hw);

// Executed FLOPs of one forward+backward of the whole job under a recompute policy: the model
// FLOPs plus what the policy re-runs (mlp: the gate/up products; full: every layer's forward).
double executed_training_flops(const ModelConfig& m, std::int64_t batch, std::int64_t seq,
                               Recompute r);

}  // namespace origami::plan
