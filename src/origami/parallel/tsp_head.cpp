// TSP LM head and loss, vocabulary ring (tsp_ops.h table). The head's vocabulary blocks
// [s*Vp/D, (s+1)*Vp/D) travel rank -> rank-1 past the rank's final-normed rows; each block's
// logits [R, Vp/D] update a running max / sum-exp / target logit and are dropped, so the
// full-vocabulary logits never exist. Backward rings [W_s | dW_s]: each block's logits are
// recomputed, turned into dlogits, added into the travelling gradient and into dX; after D
// hops each gradient block is home.
#include <cstring>
#include <limits>
#include <utility>

#include "origami/core/float_ops.h"
#include "origami/kernels/gemm.h"
#include "origami/parallel/tsp_ops.h"

namespace origami::parallel {

kernels::LossSum TspOps::head_forward(const float* nf, bool with_backward) {
  const std::int64_t R = rows(), h = config_.hidden_size, Vr = vocab_rows_;
  const std::int64_t F = Vr * h;
  Tensor cur(tracker_, MemCategory::CommBuffers, {F}),
      next(tracker_, MemCategory::CommBuffers, {F});
  copy_floats(cur.f32(), params_.lm_head.f32(), F);
  Tensor stats(tracker_, MemCategory::Workspace, {3, R});  // running max, sum-exp, target logit
  stats.zero();
  float* run_max = stats.f32();
  float* run_sum = float_at(run_max, R);
  float* target = float_at(run_sum, R);
  fill_floats(run_max, R, -std::numeric_limits<float>::infinity());
  for (int t = 0; t < size_; ++t) {
    const int shard = (rank_ + t) % size_;
    Hop hop;
    if (t + 1 < size_) hop = ring_hop(cur.f32(), next.f32(), F, t);
    Tensor logits(tracker_, MemCategory::Logits, {R, Vr});
    kernels::linear_forward(R, h, Vr, nf, cur.f32(), logits.f32());
    kernels::softmax_stats_update(R, Vr, logits.f32(), shard * Vr, config_.vocab_size,
                                  batch_->labels.data(), run_max, run_sum, target);
    hop.wait();
    std::swap(cur, next);
  }
  head_lse_ = Tensor(tracker_, MemCategory::Workspace, {R});
  const kernels::LossSum loss = kernels::softmax_stats_finish(
      R, run_max, run_sum, target, batch_->labels.data(), head_lse_.f32());
  head_input_ = nf;
  if (!with_backward) {
    head_lse_ = Tensor();
    head_input_ = nullptr;
  }
  return loss;
}

void TspOps::head_backward(float grad_scale, float* dnf) {
  ORIGAMI_CHECK(head_lse_.defined(), "head_backward without a head_forward that kept its state");
  const std::int64_t R = rows(), h = config_.hidden_size, Vr = vocab_rows_;
  const std::int64_t F = Vr * h;
  Tensor cur(tracker_, MemCategory::CommBuffers, {2 * F});
  Tensor next(tracker_, MemCategory::CommBuffers, {2 * F});
  cur.zero();
  copy_floats(cur.f32(), params_.lm_head.f32(), F);
  for (int t = 0; t < size_; ++t) {
    const int shard = (rank_ + t) % size_;
    comm::Handle recv;
    if (size_ > 1 && t + 1 < size_)
      recv = bcast_.irecv(comm::Buffer(next.f32(), 2 * F, DType::F32), (rank_ + 1) % size_, t);
    {
      Tensor logits(tracker_, MemCategory::Logits, {R, Vr});
      kernels::linear_forward(R, h, Vr, head_input_, cur.f32(), logits.f32());
      kernels::cross_entropy_backward(R, Vr, logits.f32(), shard * Vr, config_.vocab_size,
                                      batch_->labels.data(), head_lse_.f32(), grad_scale,
                                      logits.f32());
      kernels::linear_backward_weight(R, h, Vr, logits.f32(), head_input_, float_at(cur.f32(), F));
      kernels::linear_backward_input(R, h, Vr, logits.f32(), cur.f32(), dnf);
    }
    if (size_ > 1) {
      const int dst = (rank_ + size_ - 1) % size_;
      comm::Handle send;
      if (t + 1 == size_) {  // the last hop carries the gradient home
        recv = bcast_.irecv(comm::Buffer(float_at(next.f32(), F), F, DType::F32),
                            (rank_ + 1) % size_, t);
        send = bcast_.isend(comm::ConstBuffer(float_at(cur.f32(), F), F, DType::F32), dst, t);
      } else {
        send = bcast_.isend(comm::ConstBuffer(cur.f32(), 2 * F, DType::F32), dst, t);
      }
      // The outgoing pair and the incoming one travel together; cur is reused only after both.
      recv.wait();
      send.wait();
      std::swap(cur, next);
    }
  }
  const float* acc = float_at(cur.f32(), F);
  add_floats(grads_.lm_head.f32(), acc, F);
  head_lse_ = Tensor();
  head_input_ = nullptr;
}

}  // namespace origami::parallel
