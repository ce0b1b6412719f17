// One rank's part of a parallel model: its parameter and gradient shards, the strategy's
// blocks and the shared driver, plus the step-level operations whose reduction groups are
// spelled out here and in assign_reduction_axes (registry.h):
//   unmasked count, loss numerator   sum over the token axis (sp or tsp), then dp (tp ranks
//                                    hold the same tokens)
//   weight gradients                 each tensor's grad_sum_axes
//   gradient norm                    squares summed over each tensor's norm_sum_axes (its
//                                    weight axis if sharded; replicated tensors counted once)
// With the optimizer sharded over dp (ZeRO-1, model/optimizer.h), the dp sum of the gradients
// is a reduce-scatter that leaves each dp rank its optimizer slice, and the norm sums the
// slices' squares over dp too (each element counted once).
// With pipeline stages (pp > 1) a rank holds only its stage's tensors (the others are empty
// blocks, ShardSpec::on_stage false), runs its stage's 1F1B or interleaved order
// (accumulate), and the loss sum and the gradient norm's squares are also summed over pp (only
// the last stage has a loss; every stage has squares), as are a mixture of experts' aux loss
// and expert load (sum_over_stages: each stage's layers').
// The optimizer step over these operations is train/rank_step.h's.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "origami/core/precision.h"
#include "origami/model/driver.h"
#include "origami/model/gradient_staging.h"
#include "origami/model/llama.h"
#include "origami/model/optimizer.h"
#include "origami/parallel/pipeline_stages.h"
#include "origami/parallel/strategies/mesh/mesh_ops.h"

namespace origami::parallel {

class RankModel {
 public:
  // Allocates and initialises this rank's shards exactly as slices of the single-device model
  // (ConfigError before any work if the layout cannot hold sequences of `seq` tokens). The
  // baseline strategies (mesh_strategy) unless another strategy is given.
  // With a bf16 `precision` (training's policy, core/precision.h) the parameters are the fp32
  // master, accounted as optimizer state, and the linears read a bf16 compute copy, accounted
  // as parameters (ConfigError first, before any allocation, under a layout that cannot:
  // training_precision.h).
  RankModel(const ModelConfig& config, ParallelGroups& groups, std::int64_t seq,
            Recompute recompute, MemoryTracker& tracker, std::uint64_t seed,
            const Precision& precision = Precision::fp32());
  RankModel(const ModelConfig& config, ParallelGroups& groups, std::int64_t seq,
            Recompute recompute, MemoryTracker& tracker, std::uint64_t seed, Strategy strategy,
            const Precision& precision = Precision::fp32());

  const ModelConfig& config() const { return config_; }
  ParallelGroups& groups() { return groups_; }
  const TokenLayout& layout() const { return layout_; }
  const std::vector<ShardSpec>& specs() const { return specs_; }
  ModelTensors& params() { return params_; }
  // The step's gradients: fp32, or bf16 under --grad-reduce-dtype bf16 (core/precision.h;
  // the blocks then write fp32 staging tensors that the driver adds into these per unit:
  // model/gradient_staging.h). What the reductions, the norm, clipping and AdamW read.
  ModelTensors& grads() { return grads_; }
  bool reduces_gradients_in_bf16() const { return staging_.has_value(); }
  // The bf16 compute copy (empty under fp32), and its refresh from the master: after every
  // optimizer step (parallel_train_step) and after anything else writes the master (a
  // checkpoint load). Nothing under fp32.
  const ModelTensors& compute_weights() const { return compute_; }
  bool computes_in_bf16() const { return bf16_; }
  void refresh_compute_weights();
  MemoryTracker& tracker() { return tracker_; }
  // The pipeline's chunks and their ranks (one chunk of all layers without pp) and this rank's
  // stage (its pp rank).
  const PipelineSplit& stages() const { return stages_; }
  int stage() const { return stage_; }

  // This rank's rows of B full sequences (the sequences of its data-parallel shard); under the
  // balanced layout by the micro-batch's own assignment, which the LocalBatch carries.
  LocalBatch localize(const TokenBatch& sequences) const;

  // Forward (+ backward) of one micro-batch; returns the rank's local loss sum and count. A
  // mixture of experts' auxiliary loss enters the step as aux_weight x router_aux_loss()
  // (the same on every rank; 1 / micro-batches: docs/moe.md), its gradient likewise.
  kernels::LossSum run(const LocalBatch& batch, bool backward, double grad_scale,
                       double aux_weight = 1.0);
  double router_aux_loss() const { return ops_->router_aux_loss(); }
  MoeLoad moe_load() const { return ops_->moe_load(); }

  // Forward + backward of the step's micro-batches, gradients accumulating (the gradient of
  // the loss sum scaled by grad_scale): one after another without stages; with pp > 1 in this
  // stage's pipeline order (pipeline_schedule.h), each chunk's activations sent to the next
  // and their gradients back over groups.pp() (rank_model_pipeline.cpp). Returns the rank's
  // local loss sum (zero off the last stage) and a mixture of experts' auxiliary loss of the
  // step (each micro-batch's router_aux_loss() weighted 1 / micro-batches; 0 for a dense
  // model) and its expert load (moe_load() summed over the micro-batches; empty for a dense
  // model). With pp > 1 the aux and the load are this stage's layers' share (each forward
  // pass's, read after it), until sum_over_stages.
  struct Accumulated {
    double loss_sum = 0, aux = 0;
    MoeLoad moe;
  };
  Accumulated accumulate(const std::vector<LocalBatch>& micro, double grad_scale);
  // Collective over pp (nothing without stages or for a dense model): the stages' aux and
  // expert load of accumulate summed, so that every rank holds the whole model's (one
  // device's). Called after wait_for_stages, like global_loss_sum.
  void sum_over_stages(Accumulated& acc);
  // Collective over pp (nothing without stages): waits until every stage has ended its
  // step's passes. Called after reduce_gradients, so that a stage that ends its passes early
  // (1F1B: the last stage first, stage 0 last) reduces its gradients over dp and the token
  // axis while the earlier stages still run their last backwards; what it waits here is the
  // idle tail of its step.
  void wait_for_stages();
  // The last pipeline step's seconds in all (its passes, its gradient reductions and
  // wait_for_stages), and of them the seconds this stage waited for its neighbours: their
  // messages and wait_for_stages. The measured bubble.
  double pipeline_seconds() const { return pipeline_seconds_; }
  double pipeline_wait_seconds() const { return pipeline_wait_seconds_; }

  // Collective: unmasked labels of these micro-batches over the whole step (sp x dp).
  std::int64_t global_unmasked(const std::vector<LocalBatch>& micro);
  // Collective: a rank's local loss sum added over sp x dp.
  double global_loss_sum(double local);
  // Collective: the gradient reductions after the last micro-batch. With `dp_slices` (a
  // sharded optimizer's slices, AdamW::slices), the dp reduction is an in-place reduce-scatter
  // over dp (the same ring, blocks and order of additions as the all-reduce's first half, so
  // the slice is bitwise what the all-reduce gives) and the axes listed after dp reduce the
  // slice only; outside its slice a gradient then holds partial sums.
  void reduce_gradients(const OptimizerSlices* dp_slices = nullptr);
  // Collective: the global gradient norm (after reduce_gradients, with the same slices).
  double grad_norm(const OptimizerSlices* dp_slices = nullptr);

  // Collective over the shard axis (and pp: each tensor from its stage): every tensor of
  // `tensors` (params, grads or a moment) gathered full on every rank, in fp32 (bf16
  // gradients widened exactly).
  std::vector<Tensor> gather(ModelTensors& tensors, MemoryTracker& into);

 private:
  ModelConfig config_;
  ParallelGroups& groups_;
  MemoryTracker& tracker_;
  TokenLayout layout_;
  PipelineSplit stages_;
  int stage_ = 0;
  std::vector<ShardSpec> specs_;
  bool bf16_ = false;
  ModelTensors params_, grads_;
  // --grad-reduce-dtype bf16: the fp32 tensors the blocks write, defined only during a unit's
  // backward, and their staging into grads_ (bf16). Otherwise the blocks write grads_.
  ModelTensors staged_;
  std::optional<GradientStaging> staging_;
  ModelTensors compute_;  // bf16 matrices (model/compute_copy.h); empty under fp32
  std::unique_ptr<StrategyOps> ops_;
  ModelDriver driver_;

  double pipeline_seconds_ = 0, pipeline_wait_seconds_ = 0;
  std::chrono::steady_clock::time_point pipeline_start_;
  // The tensors the blocks and the driver write: staged_ under bf16 gradients, else grads_.
  ModelTensors& written_gradients() { return staging_ ? staged_ : grads_; }
  // The pipeline case of accumulate (pp > 1).
  Accumulated accumulate_stage(const std::vector<LocalBatch>& micro, double grad_scale);
};

}  // namespace origami::parallel
