// TSP LM head and loss, vocabulary ring (tsp_ops.h table). The head's vocabulary blocks
// [s*Vp/D, (s+1)*Vp/D) travel rank -> rank-1 past the rank's final-normed rows; each block's
// logits [R, Vp/D] update a running max / sum-exp / target logit and are dropped, so the
// full-vocabulary logits never exist. Backward rings W_s and its gradient dW_s as separate
// messages (GradRing, tsp_grad_ring.h): each block's logits are recomputed, turned into
// dlogits and into dX and a local dW while dW_s is in flight, which is then added and passed
// on; after D hops each gradient block is home.
#include <limits>
#include <utility>

#include "origami/core/float_ops.h"
#include "origami/kernels/gemm.h"
#include "origami/parallel/tsp_grad_ring.h"
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
  in_backward_ = with_backward;
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
  GradRing ring(bcast_, F, tracker_);
  copy_floats(ring.weights(), params_.lm_head.f32(), F);
  for (int t = 0; t < size_; ++t) {
    const int shard = (rank_ + t) % size_;
    float* delta = ring.begin_step();  // this rank's dW; the accumulator is in flight
    {
      Tensor logits(tracker_, MemCategory::Logits, {R, Vr});
      kernels::linear_forward(R, h, Vr, head_input_, ring.weights(), logits.f32());
      kernels::cross_entropy_backward(R, Vr, logits.f32(), shard * Vr, config_.vocab_size,
                                      batch_->labels.data(), head_lse_.f32(), grad_scale,
                                      logits.f32());
      kernels::linear_backward_weight(R, h, Vr, logits.f32(), head_input_, delta);
      kernels::linear_backward_input(R, h, Vr, logits.f32(), ring.weights(), dnf);
    }
    ring.end_step();
  }
  add_floats(grads_.lm_head.f32(), ring.finish(), F);
  head_lse_ = Tensor();
  head_input_ = nullptr;
}

}  // namespace origami::parallel
