// AdamW over the tensors a rank owns, and global-norm gradient clipping.
//
// Optimizer-state sharding over data parallelism (ZeRO-1, `--shard-optimizer`): the dp ranks
// hold the same tensors, so each keeps the moments of one contiguous slice of each of them
// only, the slices of comm::balanced_counts (the blocks a reduce-scatter over dp leaves on each
// rank). step() then updates that slice and all-gathers the parameters over dp. Bytes per
// parameter: fp32 4 + 4 + 8 (unsharded 16) becomes 4 + 4 + 8/dp; with bf16 weights and an
// fp32 master copy (issue 17's convention) 6 + 12/dp instead of 18: the master copy is
// optimizer state and is sliced with the moments.
#pragma once

#include <cstdint>
#include <vector>

#include "origami/comm/communicator.h"
#include "origami/kernels/optimizer.h"
#include "origami/model/weights.h"

namespace origami {

// The part of each tensor (named_tensors order) whose optimizer state a rank owns: elements
// [offset[i], offset[i] + count[i]) of tensor i's row-major buffer.
struct OptimizerSlices {
  std::vector<std::int64_t> offset, count;
  std::int64_t elements() const;  // the sum of the counts
};

// Block `part` of `parts` of every tensor of `tensors` (comm::balanced_counts: the first
// numel % parts blocks get one element more); parts 1: every tensor whole.
OptimizerSlices optimizer_slices(ModelTensors& tensors, int parts, int part);

class AdamW {
 public:
  // Moments are allocated (zeroed) with the model's shapes, as optimizer state.
  AdamW(const ModelConfig& config, MemoryTracker& tracker, kernels::AdamWHyper hyper);
  // Moments with the shapes of `params` (a rank's shards: the optimizer state is sharded too).
  AdamW(ModelTensors& params, MemoryTracker& tracker, kernels::AdamWHyper hyper);
  // Sharded over the data-parallel axis `dp` (ZeRO-1): moments for this rank's
  // optimizer_slices(params, dp.size(), dp.rank()) only, 1-D tensors of the slices' counts.
  // dp of size 1: the same as unsharded.
  AdamW(ModelTensors& params, MemoryTracker& tracker, kernels::AdamWHyper hyper,
        comm::Communicator dp);

  // One step with learning rate `lr` (the schedule's value). Norm weights get no weight decay.
  // Sharded: reads only the slices of `grads` (the reduce-scatter's result; the rest may hold
  // partial sums), updates the slices of `params`, then all-gathers each parameter over dp
  // (collective), so every dp rank ends with the same full parameters.
  void step(ModelTensors& params, ModelTensors& grads, float lr);

  bool sharded() const { return dp_.valid() && dp_.size() > 1; }
  // The slices this rank steps (whole tensors when not sharded).
  const OptimizerSlices& slices() const { return slices_; }
  // Collective over dp when sharded: moment `which` (0 first, 1 second) as full tensors with
  // the shapes of `like` (the rank's parameters), in Workspace on `tracker`; unsharded: copies.
  std::vector<Tensor> gather_moment(int which, ModelTensors& like, MemoryTracker& tracker);
  // Takes this rank's slices of full-shaped moments (as gather_moment returns them, e.g. read
  // from a checkpoint) as its state; unsharded: takes them whole.
  void adopt_moments(std::vector<Tensor>& first, std::vector<Tensor>& second);

  std::int64_t steps_taken() const { return step_; }
  // A resumed run continues the bias correction where the checkpoint left it.
  void restore_steps_taken(std::int64_t steps) { step_ = steps; }
  const kernels::AdamWHyper& hyper() const { return hyper_; }
  // The moments as held: the params' shapes, or (sharded) 1-D slices.
  ModelTensors& first_moment() { return m_; }
  ModelTensors& second_moment() { return v_; }

 private:
  kernels::AdamWHyper hyper_;
  comm::Communicator dp_;  // invalid: not sharded
  OptimizerSlices slices_;
  ModelTensors m_;
  ModelTensors v_;
  std::int64_t step_ = 0;
};

// The gradients below may be fp32 or bf16 (--grad-reduce-dtype bf16: AdamW and the norm read
// them widened exactly; clipping rounds each scaled value to bf16 once).
// Euclidean norm of all gradients together (accumulated in double).
double global_grad_norm(ModelTensors& grads);
// Scales every gradient by clip_coefficient(norm, max_norm); returns the coefficient.
float clip_gradients(ModelTensors& grads, double norm, double max_norm);
// The same on the slices only (a sharded optimizer reads nothing else).
float clip_gradients(ModelTensors& grads, double norm, double max_norm,
                     const OptimizerSlices& slices);

// Throws Error when step `step`'s loss or gradient norm is not finite. Called before
// clipping and AdamW: one NaN gradient would reach every weight through the moments, and the
// next checkpoint would save that model as complete.
void check_step_finite(std::int64_t step, double loss, double grad_norm);

}  // namespace origami
