// TSP LM head and loss, vocabulary ring (schedule.h). The head's vocabulary blocks
// [s*Vp/D, (s+1)*Vp/D) travel rank -> rank-1 past the rank's final-normed rows; each block's
// logits [R, Vp/D] update a running max / sum-exp / target logit and are dropped, so the
// full-vocabulary logits never exist. Backward rings W_s and its gradient dW_s as separate
// messages (GradRing, tsp_grad_ring.h): each block's logits are recomputed, turned into
// dlogits and into dX and a local dW while dW_s is in flight, which is then added and passed
// on; after D hops each gradient block is home. The blocks travel in the head's dtype (bf16
// under training's bf16 compute copy), its gradient in fp32.
//
// Each vocabulary block travels in chunks of at most kHeadRingChunkFloats (4 MiB of fp32): the
// ring runs once per chunk, so the head's ring buffers (2 chunks forward, GradRing's 5
// backward) and its logits block [R, chunk rows] stay bounded whatever V·h/D is: at V 32000,
// h 1024, D 4 a whole block is 31 MiB and five of them would be 156 MiB per rank. Bytes are
// the same; messages are k = ceil(Vp/D / chunk rows) times as many.
#include <algorithm>
#include <limits>
#include <utility>

#include "origami/core/float_ops.h"
#include "origami/kernels/gemm.h"
#include "origami/model/weights_bf16.h"
#include "origami/parallel/strategies/tsp/tsp_grad_ring.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"
#include "origami/parallel/strategies/tsp/weight_ring.h"

namespace origami::parallel {

kernels::LossSum TspOps::head_forward(const float* nf, bool with_backward) {
  const std::int64_t R = rows(), h = config_.hidden_size, Vr = vocab_rows_;
  const std::int64_t chunk = tsp_head_chunk_rows(rank_shapes());
  const Tensor& head = matrices().head();
  WeightRing ring(bcast_, chunk * h, tracker_, head.dtype());  // one lap per chunk
  Tensor stats(tracker_, MemCategory::Workspace, {3, R});  // running max, sum-exp, target logit
  stats.zero();
  float* run_max = stats.f32();
  float* run_sum = float_at(run_max, R);
  float* target = float_at(run_sum, R);
  fill_floats(run_max, R, -std::numeric_limits<float>::infinity());
  for (std::int64_t c0 = 0; c0 < Vr; c0 += chunk) {
    const std::int64_t n = std::min(chunk, Vr - c0);  // vocabulary rows of this chunk
    copy_elements(head, c0 * h, ring.shard(), 0, n * h);
    for (int t = 0; t < size_; ++t) {
      const int shard = (rank_ + t) % size_;
      ring.begin_step(n * h);
      Tensor logits(tracker_, MemCategory::Logits, {R, n});
      kernels::linear_forward(R, h, n, nf, weight_view(ring.shard()), logits.f32());
      kernels::softmax_stats_update(R, n, logits.f32(), shard * Vr + c0, config_.vocab_size,
                                    batch_->labels.data(), run_max, run_sum, target);
      ring.end_step();
    }
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
  const std::int64_t chunk = tsp_head_chunk_rows(rank_shapes());
  const Tensor& head = matrices().head();
  for (std::int64_t c0 = 0; c0 < Vr; c0 += chunk) {
    const std::int64_t n = std::min(chunk, Vr - c0);
    GradRing ring(bcast_, n * h, tracker_, head.dtype());
    copy_elements(head, c0 * h, ring.shard(), 0, n * h);
    for (int t = 0; t < size_; ++t) {
      const int shard = (rank_ + t) % size_;
      float* delta = ring.begin_step();  // this rank's dW; the accumulator is in flight
      {
        Tensor logits(tracker_, MemCategory::Logits, {R, n});
        const kernels::WeightView w = weight_view(ring.shard());
        kernels::linear_forward(R, h, n, head_input_, w, logits.f32());
        kernels::cross_entropy_backward(R, n, logits.f32(), shard * Vr + c0, config_.vocab_size,
                                        batch_->labels.data(), head_lse_.f32(), grad_scale,
                                        logits.f32());
        kernels::linear_backward_weight(R, h, n, logits.f32(), head_input_, delta, w.dtype());
        kernels::linear_backward_input(R, h, n, logits.f32(), w, dnf);
      }
      ring.end_step();
    }
    add_floats(float_at(grads_.head().f32(), c0 * h), ring.finish(), n * h);
  }
  head_lse_ = Tensor();
  head_input_ = nullptr;
}

}  // namespace origami::parallel
