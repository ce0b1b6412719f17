// The forward ring of TSP's MLP and LM head (schedule.h): the shard a rank holds at step t
// travels rank -> rank-1 while the rank computes with it, so after D steps of a lap every rank
// has used every shard. A step reads top to bottom: begin_step posts the hop (the weights are
// final, so rank-1 can receive them while this rank uses them), the caller computes with
// weights(), end_step waits and the incoming shard becomes weights().
//
// Tags: the ring numbers its steps over all its laps and tags each hop with its step, so the
// LM head's chunks (one lap each, on one ring) never match another chunk's message.
//
// Resident (CommBuffers): two buffers of `floats` elements (current + incoming), also at D = 1,
// fp32 or (the bf16 inference's MLP shards) bf16.
#pragma once

#include <cstdint>

#include "origami/comm/communicator.h"
#include "origami/core/tensor.h"

namespace origami::parallel {

class WeightRing {
 public:
  WeightRing(comm::Communicator& comm, std::int64_t floats, MemoryTracker& tracker,
             DType dtype = DType::F32);
  WeightRing(const WeightRing&) = delete;
  WeightRing& operator=(const WeightRing&) = delete;
  ~WeightRing();

  // The shard held at this step; before a lap's first step the caller writes its own here.
  float* weights() { return buf_[cur_].f32(); }
  Tensor& shard() { return buf_[cur_]; }  // the same, in the ring's dtype
  // Posts the hop of this step's first `count` elements (<= floats), except at a lap's last
  // step.
  void begin_step(std::int64_t count);
  // Waits for the hop; the incoming shard becomes weights().
  void end_step();

 private:
  comm::Communicator& comm_;
  std::int64_t floats_;
  int size_, rank_, step_ = 0, cur_ = 0;
  bool hopping_ = false;
  Tensor buf_[2];
  comm::Handle send_, recv_;
};

}  // namespace origami::parallel
