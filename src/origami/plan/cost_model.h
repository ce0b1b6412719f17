// The planner's closed-form cost model of every strategy (single, DP, TP, TP-SP, SP, TP+SP and
// TSP, each optionally under DP): per-device memory by category, bytes each rank sends per
// collective, and model FLOPs. Derived from what the engine saves and issues (docs/planner.md
// has the formulas and where each comes from) but independent of the engine's code: it only
// needs the model's shape, so it answers for configurations no machine here could run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "origami/core/precision.h"
#include "origami/model/config.h"
#include "origami/model/recompute.h"
#include "origami/parallel/parallel_config.h"

namespace origami::plan {

// A layout is the engine's ParallelConfig (parallel/parallel_config.h): dp x sp x tp ranks
// for the baselines (`sequence_parallel` = TP-SP regions, only meaningful with tp > 1), or
// dp x tsp for TSP. The planner ignores its token layout (zigzag is assumed).
using Mesh = parallel::ParallelConfig;

// The JSON name of a layout's strategy: single, dp, tp (with or without regions), sp, tpsp
// (TP+SP: tp and sp both > 1), tsp.
std::string json_strategy(const Mesh& m);

struct DocumentSample;  // plan/document_imbalance.h

using origami::Recompute;  // model/recompute.h: none | mlp | full
using origami::parse_recompute;
using origami::recompute_name;

// Bytes per element of each kind of tensor (fp32 everywhere in the engine today); `of` maps a
// Precision profile (core/precision.h, shared with the dry run) onto it. Optimizer state per
// parameter is master + 2 x optimizer (AdamW's moments); workspace uses `activation`.
struct ElementSizes {
  std::int64_t param = 4, grad = 4, optimizer = 4, activation = 4, comm = 4;
  std::int64_t master = 0, logits = 4;
  static ElementSizes of(const Precision& p);
};

struct Workload {
  std::int64_t batch = 1;  // micro-batch of each dp replica (sequences); the whole job's
                           // micro-batch is batch x dp, its global batch that x grad_accum
  std::int64_t grad_accum = 1;  // micro-batches per optimizer step
  // When > 0, the global batch is fixed instead of the micro-batch: each layout's replicas run
  // global_batch / (dp x grad_accum) sequences each (per_replica below).
  std::int64_t global_batch = 0;
  std::int64_t seq = 1;    // tokens per sequence, split over sp (or tsp)
  bool contiguous = false; // token layout: contiguous chunks (S % degree) instead of zigzag
                           // (S % 2·degree); the costs are the same
  Recompute recompute = Recompute::None;
  ElementSizes elem;
  // --shard-optimizer (ZeRO-1, model/optimizer.h): each dp rank holds the optimizer state
  // (moments and master copy) of its comm::balanced_counts slice of every tensor, the dp
  // gradient reduction is a reduce-scatter and the parameters are all-gathered over dp.
  bool shard_optimizer = false;
  // Packed documents under document masking (`origami plan --documents`; rows of S = seq):
  // attention's products count the sample rows' visible pairs, and the step time the slowest
  // rank's share of them under the sample's layout (predict.h). Null: one causal document per
  // row. A copy of the workload for another seq must drop it.
  std::shared_ptr<const DocumentSample> documents;
  // Mixed precision (bf16 activations): selects the hardware's bf16 FLOP rate.
  bool bf16() const { return elem.activation == 2; }
  void set_precision(const Precision& p) { elem = ElementSizes::of(p); }
};

// The workload as the replicas of `mesh` run it: w itself, or, with a fixed global batch, the
// micro-batch it gives each of mesh.dp replicas; ConfigError when it does not split evenly.
Workload per_replica(const Workload& w, const Mesh& mesh);

// Refuses (ConfigError saying what to change) a mesh the engine would refuse: degrees < 1,
// tsp combined with tp or sp, tp (or tsp) not dividing heads, kv heads or the MLP width,
// zigzag's S % 2·degree (contiguous: S % degree), TP-SP's rows % tp.
void check_layout(const ModelConfig& m, const Mesh& mesh, const Workload& w);

// Per-device peak bytes by category (the tracker's categories, core/memory_tracker.h).
// Parameters, gradients, optimizer state (AdamW: two moments, plus a master copy in mixed
// precision) are resident; activations is the peak of the saved tensors during one
// forward+backward under the recompute policy; comm_buffers and workspace the peaks of the
// schedule's resident buffers and of the blocks' temporaries (plan/buffers.cpp); logits the
// head's block. `overhead` is the hardware's runtime overhead (context, collective-library
// buffers, allocator slack), not a tracker category: 0 unless the caller sets it.
// total() adds the categories' peaks, an upper bound of the tracker's peak of the sum (the
// categories peak in different phases).
struct Memory {
  std::int64_t parameters = 0, gradients = 0, optimizer = 0, activations = 0, logits = 0;
  std::int64_t comm_buffers = 0, workspace = 0, overhead = 0;
  std::int64_t total() const {
    return parameters + gradients + optimizer + activations + logits + comm_buffers + workspace +
           overhead;
  }
};
// With pipeline stages (mesh.pp > 1) the worst stage's (memory_of_stage, by total).
Memory memory_per_device(const ModelConfig& m, const Mesh& mesh, const Workload& w);
// pp rank `stage`'s peaks (docs/planner.md, "Pipeline stages"): the resident categories of its
// own tensors, the saved activations of its passes in flight (pipeline_in_flight), the
// logits on the last stage only, and beside the layers' buffers the boundary rows it holds.
Memory memory_of_stage(const ModelConfig& m, const Mesh& mesh, const Workload& w, int stage);

// Where an operation is issued: the forward pass, the backward pass (including the forward
// re-run of full recompute), or once per step (the gradient reductions).
enum class Phase { Forward, Backward, Step };

// One kind of collective on one mesh axis: calls and bytes the given rank sends.
struct CommOp {
  std::string axis;  // "tp", "sp", "dp", "tsp" (the engine's sequence axis under TSP) or
                     // "tsp_shards" (TSP's duplicate of it for weight broadcasts and rings)
  std::string op;    // "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                     // "send", "recv", "all_to_all"
  std::int64_t calls = 0;
  std::int64_t bytes_sent = 0;
  // Of which in the forward pass (backward = total - forward), and inside the layers (per
  // layer: layer_* / L; the rest is the embedding, head and loss, once per micro-batch).
  std::int64_t forward_calls = 0, forward_bytes = 0;
  std::int64_t layer_calls = 0, layer_bytes = 0;
};
// What a rank holds of the model besides the layers of `m`: the embedding and the head (the
// final norm, the LM head and its loss). Without pipeline stages both; under pp a chunk's
// layers, the embedding with chunk 0 and the head with the last chunk (pipeline_stages.h).
struct ModelEnds {
  bool embedding = true, head = true;
};

// One micro-batch's forward+backward (the blocks' collectives; the step's gradient
// reductions are separate), for the rank at `axis_rank` of each axis (bytes differ between
// ranks only when a buffer does not split evenly). Ops with zero calls are omitted. TSP's
// embedding all-to-alls move data-dependent bytes: their calls are exact, their bytes the
// expectation for ids spread evenly over the vocabulary blocks (R·(D-1)/D rows each way).
// `ends` drops the embedding's or the head's messages (a pipeline chunk's, with m holding its
// layers and mesh its dp/tp/sp/tsp axes, pp 1).
std::vector<CommOp> comm_per_micro_batch(const ModelConfig& m, const Mesh& mesh, const Workload& w,
                                         int axis_rank = 0, ModelEnds ends = {});
// The step's weight-gradient all-reduces (once per optimizer step, every tensor over sp then
// dp, and the RMSNorm weights over tp under TP-SP; under TSP the norms over tsp, everything
// over dp; with kv heads replicated, the k/v gradients over their kv-replica group, axis
// "tp-kv" or "tsp-kv", whose rank is axis_rank % replicas).
// With shard_optimizer (dp > 1): the dp all-reduce becomes a reduce-scatter (its first half)
// and an all-gather of the updated parameters; the reductions after dp (TP-SP's norms over
// tp, the kv-replica groups) move the rank's dp slice only.
// `ends`: of the embedding's and the head's tensors only those held (a pipeline chunk's, as
// comm_per_micro_batch's).
std::vector<CommOp> comm_gradient_reduction(const ModelConfig& m, const Mesh& mesh,
                                            const ElementSizes& elem, int axis_rank = 0,
                                            bool shard_optimizer = false, ModelEnds ends = {});

// The step's scalar all-reduces (8-byte F64/I64 values whatever the profile): the label count
// and the loss sum over the sequence axis (sp, or tsp) then dp (RankModel::global_unmasked,
// global_loss_sum), and the sharded weights' squared norm over the axis they are split on (tp
// or tsp; RankModel::grad_norm). Once per step, after the gradient reductions.
// With shard_optimizer (dp > 1) every group of squares is summed over dp as well. Under pp
// (mesh.pp > 1) the loss sum and the squared norm are summed over pp too (the last stage
// computes the loss, each stage its own tensors' squares), and the pipeline ends with a pp
// barrier (RankModel::accumulate_stage; 0 bytes), on pp rank `stage`.
std::vector<CommOp> comm_step_scalars(const Mesh& mesh, int axis_rank = 0,
                                      bool shard_optimizer = false, int stage = 0);

// Model FLOPs of one forward+backward of `batch` sequences of `seq` tokens (docs/flops.md:
// 6·P·T + 3.5·4·d·H·B·S(S+1)/2·L), the whole job's, not per device.
double training_flops(const ModelConfig& m, std::int64_t batch, std::int64_t seq);

// Bytes sent by rank r of an n-rank ring collective (docs/comm.md), counts in elements.
std::int64_t all_gather_sent(std::int64_t block_count, int n, std::int64_t elem);
std::int64_t reduce_scatter_sent(std::int64_t block_count, int n, std::int64_t elem);
std::int64_t all_reduce_sent(std::int64_t count, int n, int r, std::int64_t elem);

}  // namespace origami::plan
