#include "origami/parallel/strategies/tsp/grad_reduce.h"

#include <algorithm>
#include <utility>

#include "origami/core/float_ops.h"

namespace origami::parallel {

GradReduceChain::GradReduceChain(comm::Communicator& comm, std::int64_t floats,
                                 MemoryTracker& tracker, Home home)
    : comm_(comm), size_(comm.size()), rank_(comm.rank()), home_(std::move(home)) {
  for (int i = 0; i < std::min(size_, kSlots); ++i)
    slots_[i] = Tensor(tracker, MemCategory::CommBuffers, {floats});
  sum_ = Tensor(tracker, MemCategory::CommBuffers, {size_ > 1 ? floats : 0});
}

GradReduceChain::~GradReduceChain() {
  // Pending only when an exception unwinds the step: every rank posted the same reduces, so
  // they complete; never leave the transport writing into freed memory.
  for (comm::Handle& h : reduce_) {
    try {
      h.wait();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the original error is already propagating
    }
  }
}

void GradReduceChain::wait_slot(int slot) {
  reduce_[slot].wait();
  if (group_[slot] == rank_) home_(sum_.f32());
  group_[slot] = -1;
}

float* GradReduceChain::begin(int group) {
  const int s = group % kSlots;
  wait_slot(s);  // group j-3's reduce used this buffer
  slots_[s].zero();
  return slots_[s].f32();
}

void GradReduceChain::post(int group) {
  const int s = group % kSlots;
  if (size_ == 1) {
    home_(slots_[s].f32());
    return;
  }
  reduce_[s] = comm_.ireduce(slots_[s], sum_, group);
  group_[s] = group;
}

void GradReduceChain::finish() {
  for (int s = 0; s < kSlots; ++s) wait_slot(s);
}

}  // namespace origami::parallel
