#include "origami/parallel/strategies/tsp/weight_ring.h"

#include "origami/core/error.h"

namespace origami::parallel {

WeightRing::WeightRing(comm::Communicator& comm, std::int64_t floats, MemoryTracker& tracker,
                       DType dtype)
    : comm_(comm), floats_(floats), size_(comm.size()), rank_(comm.rank()) {
  buf_[0] = Tensor(tracker, MemCategory::CommBuffers, dtype, {floats});
  buf_[1] = Tensor(tracker, MemCategory::CommBuffers, dtype, {floats});
}

WeightRing::~WeightRing() {
  // Only reached with a hop pending when an exception unwinds the step: every rank posted the
  // same messages, so they complete; never leave the transport writing into freed memory.
  for (comm::Handle* h : {&send_, &recv_}) {
    try {
      h->wait();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the original error is already propagating
    }
  }
}

void WeightRing::begin_step(std::int64_t count) {
  ORIGAMI_CHECK(count <= floats_, "WeightRing hop of {} floats in buffers of {}", count, floats_);
  hopping_ = step_ % size_ + 1 < size_;
  if (!hopping_) return;
  // Rank r next holds what rank r+1 held.
  const DType dtype = buf_[cur_].dtype();
  recv_ = comm_.irecv(comm::Buffer(buf_[1 - cur_].raw(), count, dtype), (rank_ + 1) % size_,
                      step_);
  send_ = comm_.isend(comm::ConstBuffer(buf_[cur_].raw(), count, dtype),
                      (rank_ + size_ - 1) % size_, step_);
}

void WeightRing::end_step() {
  ++step_;
  if (!hopping_) return;
  send_.wait();
  recv_.wait();
  cur_ = 1 - cur_;
  hopping_ = false;
}

}  // namespace origami::parallel
