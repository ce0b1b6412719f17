// TSP gated MLP, ring schedule (schedule.h). The packed shard M_j = [gate_j | up_j |
// down_j] travels rank -> rank-1: at step t rank r holds M_{(r+t) mod D} and adds that shard's
// partial output for its own tokens; the next hop is posted before the GEMMs and waited
// after (WeightRing, weight_ring.h), and no all-reduce is needed (each rank sums its own rows over all shards). Backward
// rings M_s and its accumulator dM_s as separate messages (GradRing, tsp_grad_ring.h): each
// rank computes its tokens' contribution into a local buffer while dM_s is in flight, then
// adds and passes it on; after D hops the accumulator is home. Both directions read and write
// the shard's gate/up pre-activations in place, in its slot of the layer's saved tensors.
#include <utility>

#include "origami/core/float_ops.h"
#include "origami/model/weights_bf16.h"
#include "origami/parallel/strategies/tsp/tsp_grad_ring.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"
#include "origami/parallel/strategies/tsp/weight_ring.h"

namespace origami::parallel {

namespace {
// A packed shard M_j in its buffer's dtype (fp32, or bf16: the bf16 inference's prefill and
// training's bf16 compute copy).
MlpWeights weights_of(const Tensor& buf, std::int64_t ffn, std::int64_t h) {
  const kernels::WeightView p(buf.raw(), buf.dtype());
  return {p, p.at(ffn * h), p.at(2 * ffn * h)};
}
}  // namespace

std::int64_t TspOps::mlp_floats() const { return tsp_mlp_shard_floats(rank_shapes()); }

void TspOps::pack_mlp_shard(std::int64_t l, Tensor& out) const {
  const LayerTensors& L = matrices().layers[static_cast<std::size_t>(l)];
  std::int64_t at = 0;
  for (const Tensor* t : {&L.w_gate, &L.w_up, &L.w_down}) {
    copy_elements(*t, 0, out, at, t->numel());
    at += t->numel();
  }
}

void TspOps::mlp_forward(std::int64_t l, const float* n, MlpSaved& s, float* x) {
  if (config_.is_moe()) return moe_forward(l, n, s, x);
  const std::int64_t R = rows(), h = config_.hidden_size, ffn = config_.intermediate_size / size_;
  const MlpDims dims{.rows = R, .hidden = h, .ffn = ffn};
  const std::int64_t F = mlp_floats();
  // The ring carries the weights' own dtype: a bf16 shard (inference, or training's compute
  // copy) hops at half the bytes and its products read it as it is (kernels/gemm.h).
  WeightRing ring(bcast_, F, tracker_, weight_dtype(l));
  pack_mlp_shard(l, ring.shard());
  s.a = Tensor(tracker_, MemCategory::Activations, {size_, R, ffn});
  s.u = Tensor(tracker_, MemCategory::Activations, {size_, R, ffn});
  for (int t = 0; t < size_; ++t) {
    const int shard = (rank_ + t) % size_;
    ring.begin_step(F);  // the shard moves on to rank-1 while this rank uses it
    // The gate/up pre-activations written straight into this shard's slot of the saved
    // tensors (no second copy at the peak).
    mlp_block_forward(dims, n, weights_of(ring.shard(), ffn, h), tracker_,
                      MlpSlot{float_at(s.a.f32(), shard * R * ffn),
                              float_at(s.u.f32(), shard * R * ffn)},
                      x);
    ring.end_step();
  }
}

void TspOps::mlp_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dx, float* dn) {
  if (config_.is_moe()) return moe_backward(l, n, s, dx, dn);
  const std::int64_t R = rows(), h = config_.hidden_size, ffn = config_.intermediate_size / size_;
  const MlpDims dims{.rows = R, .hidden = h, .ffn = ffn};
  LayerTensors& G = grads_.layers[static_cast<std::size_t>(l)];
  GradRing ring(bcast_, mlp_floats(), tracker_, weight_dtype(l));  // gradients in fp32
  pack_mlp_shard(l, ring.shard());
  const bool saved = s.a.defined();
  for (int t = 0; t < size_; ++t) {
    const int shard = (rank_ + t) % size_;
    float* delta = ring.begin_step();  // this rank's contribution; the accumulator is in flight
    const MlpWeights w = weights_of(ring.shard(), ffn, h);
    MlpSaved recomputed;  // recompute policies mlp and full: gate/up as Workspace
    if (!saved) mlp_block_recompute(dims, n, w, tracker_, recomputed);
    const MlpSavedView g = saved ? MlpSavedView{float_at(s.a.f32(), shard * R * ffn),
                                                float_at(s.u.f32(), shard * R * ffn)}
                                 : MlpSavedView{recomputed.a.f32(), recomputed.u.f32()};
    mlp_block_backward(dims, n, w, g, dx, tracker_, dn,
                       {delta, float_at(delta, ffn * h), float_at(delta, 2 * ffn * h)});
    ring.end_step();
  }
  // This rank's own shard's accumulator, home after D hops (none when D = 1).
  const float* acc = ring.finish();
  for (Tensor* t : {&G.w_gate, &G.w_up, &G.w_down}) {
    add_floats(t->f32(), acc, t->numel());
    acc += t->numel();
  }
  s = MlpSaved();
}

}  // namespace origami::parallel
