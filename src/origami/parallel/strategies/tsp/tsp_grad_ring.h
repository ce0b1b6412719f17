// The backward ring of TSP's MLP and LM head (docs/design.md §4.2): shard s's weights and its
// gradient accumulator both travel rank -> rank-1, but as separate messages, so that a rank's
// computation at step t never waits for the accumulator of step t -- only the add does:
//   * weights: the hop to rank-1 is posted at the start of the step (the weights are final, so
//     rank-1 can receive them while this rank uses them) and waited at its end;
//   * accumulator: the rank writes its tokens' contribution into a zeroed local buffer Δ while
//     the accumulator of the shard it holds is still in flight from rank+1; then it waits for
//     it, adds it into Δ and sends Δ on.
// After D steps each accumulator has visited every rank and a last hop brings it home: weights
// make D-1 hops of F floats, accumulators D hops (per rank (2D-1)·F floats sent, the same as
// moving [W | dW] together with a last dW hop).
//
// Resident (CommBuffers, F floats each): weights current + incoming (2F, one when D = 1), the
// incoming accumulator (F, D > 1), Δ being written + Δ being sent (2F, one when D = 1):
// 5F at D > 1. The weights travel in their own dtype (bf16 under training's bf16 compute copy:
// those two buffers and hops are half the bytes), the accumulators in fp32.
#pragma once

#include <cstdint>

#include "origami/comm/communicator.h"
#include "origami/core/tensor.h"

namespace origami::parallel {

class GradRing {
 public:
  GradRing(comm::Communicator& comm, std::int64_t floats, MemoryTracker& tracker,
           DType weights = DType::F32);
  GradRing(const GradRing&) = delete;
  GradRing& operator=(const GradRing&) = delete;
  ~GradRing();

  // The packed weights of the shard held at this step, in the ring's weight dtype; before the
  // first begin_step the caller packs its own shard here.
  Tensor& shard() { return w_[cur_]; }
  float* weights() { return w_[cur_].f32(); }  // the same, of an fp32 ring
  // Posts this step's hops and returns the zeroed Δ the step's gradient accumulates into.
  float* begin_step();
  // Waits for the incoming accumulator, adds it into Δ and sends Δ on; waits the weight hop.
  void end_step();
  // After D steps: the rank's own shard's accumulator (every rank's contribution summed).
  const float* finish();

 private:
  comm::Communicator& comm_;
  std::int64_t floats_;
  int size_, rank_, step_ = 0;
  Tensor w_[2], acc_in_, delta_[2];
  int cur_ = 0;
  comm::Handle w_send_, w_recv_, acc_recv_, acc_send_[2];
};

}  // namespace origami::parallel
