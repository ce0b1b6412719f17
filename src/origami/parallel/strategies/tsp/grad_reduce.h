// The reduces of TSP's attention weight gradients (schedule.h, tsp_attention.cpp): each head
// group j's packed gradient dP_j -- this rank's contribution, written by the group's backward
// -- is summed on its owner, rank j, by a chain reduce on its own communicator, posted once the
// group's gradient is complete and waited only when its slot is reused, three groups later
// (or at finish), so that it runs behind more than one group. The owner's sum is handed to
// `home` (the caller adds it into the shard's gradients). At D = 1 nothing moves: post hands
// the rank's own gradient home.
//
// Resident (CommBuffers, `floats` each): min(D, 3) slots and, D > 1, the owner's sum; the
// collective's own staging besides (schedule.h, TspSharedBuffers::dp_reduce_staging).
#pragma once

#include <cstdint>
#include <functional>

#include "origami/comm/communicator.h"
#include "origami/core/tensor.h"

namespace origami::parallel {

class GradReduceChain {
 public:
  using Home = std::function<void(const float* sum)>;
  GradReduceChain(comm::Communicator& comm, std::int64_t floats, MemoryTracker& tracker,
                  Home home);
  GradReduceChain(const GradReduceChain&) = delete;
  GradReduceChain& operator=(const GradReduceChain&) = delete;
  ~GradReduceChain();

  // Group j's zeroed gradient buffer, once the reduce that used its slot before is done.
  float* begin(int group);
  // The same buffer, while group j's gradient is still being written.
  float* slot(int group) { return slots_[group % kSlots].f32(); }
  // Group j's gradient is complete: reduce it to its owner (D = 1: hand it home).
  void post(int group);
  // Waits for every reduce still in flight.
  void finish();

 private:
  static constexpr int kSlots = 3;
  void wait_slot(int slot);

  comm::Communicator& comm_;
  int size_, rank_;
  Home home_;
  Tensor slots_[kSlots], sum_;
  comm::Handle reduce_[kSlots];
  int group_[kSlots] = {-1, -1, -1};  // the head group each slot's reduce carries
};

}  // namespace origami::parallel
