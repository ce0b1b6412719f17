#include "origami/parallel/strategies/tsp/tsp_grad_ring.h"

#include "origami/core/error.h"
#include "origami/core/float_ops.h"

namespace origami::parallel {

namespace {
// Tags on the ring's communicator: step t's weights 2t, its accumulator 2t + 1.
int weight_tag(int t) { return 2 * t; }
int acc_tag(int t) { return 2 * t + 1; }
}  // namespace

GradRing::GradRing(comm::Communicator& comm, std::int64_t floats, MemoryTracker& tracker,
                   DType weights)
    : comm_(comm), floats_(floats), size_(comm.size()), rank_(comm.rank()) {
  w_[0] = Tensor(tracker, MemCategory::CommBuffers, weights, {floats});
  delta_[0] = Tensor(tracker, MemCategory::CommBuffers, {floats});
  if (size_ > 1) {
    w_[1] = Tensor(tracker, MemCategory::CommBuffers, weights, {floats});
    acc_in_ = Tensor(tracker, MemCategory::CommBuffers, {floats});
    delta_[1] = Tensor(tracker, MemCategory::CommBuffers, {floats});
  }
}

GradRing::~GradRing() {
  // Only reached with messages pending when an exception unwinds the step: every rank posted
  // the same messages, so they complete; never leave the transport writing into freed memory.
  for (comm::Handle* h : {&w_send_, &w_recv_, &acc_recv_, &acc_send_[0], &acc_send_[1]}) {
    try {
      h->wait();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the original error is already propagating
    }
  }
}

float* GradRing::begin_step() {
  const int t = step_;
  const int prev = (rank_ + size_ - 1) % size_, next = (rank_ + 1) % size_;
  if (t + 1 < size_) {
    w_recv_ = comm_.irecv(comm::Buffer(w_[1 - cur_]), next, weight_tag(t));
    w_send_ = comm_.isend(comm::ConstBuffer(w_[cur_]), prev, weight_tag(t));
  }
  // The accumulator rank+1 finished at its step t-1.
  if (t > 0) acc_recv_ = comm_.irecv(comm::Buffer(acc_in_), next, acc_tag(t - 1));
  Tensor& delta = delta_[t % 2];
  acc_send_[t % 2].wait();  // sent at step t-2
  zero_floats(delta.f32(), floats_);
  return delta.f32();
}

void GradRing::end_step() {
  const int t = step_++;
  Tensor& delta = delta_[t % 2];
  if (t > 0) {
    acc_recv_.wait();
    add_floats(delta.f32(), acc_in_.f32(), floats_);
  }
  if (size_ > 1)
    acc_send_[t % 2] =
        comm_.isend(comm::ConstBuffer(delta), (rank_ + size_ - 1) % size_, acc_tag(t));
  if (t + 1 < size_) {
    w_recv_.wait();
    w_send_.wait();
    cur_ = 1 - cur_;
  }
}

const float* GradRing::finish() {
  ORIGAMI_CHECK(step_ == size_, "GradRing::finish after {} of {} steps", step_, size_);
  if (size_ == 1) return delta_[0].f32();
  // The last hop: rank+1 sends this rank's own shard's accumulator home.
  acc_recv_ = comm_.irecv(comm::Buffer(acc_in_), (rank_ + 1) % size_, acc_tag(size_ - 1));
  acc_recv_.wait();
  acc_send_[0].wait();
  acc_send_[1].wait();
  return acc_in_.f32();
}

}  // namespace origami::parallel
