// TSP gated MLP, ring schedule (schedule.h). The packed shard M_j = [gate_j | up_j |
// down_j] travels rank -> rank-1: at step t rank r holds M_{(r+t) mod D} and adds that shard's
// partial output for its own tokens; the next hop is posted before the GEMMs and waited
// after, and no all-reduce is needed (each rank sums its own rows over all shards). Backward
// rings M_s and its accumulator dM_s as separate messages (GradRing, tsp_grad_ring.h): each
// rank computes its tokens' contribution into a local buffer while dM_s is in flight, then
// adds and passes it on; after D hops the accumulator is home.
#include <utility>

#include "origami/core/float_ops.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/swiglu.h"
#include "origami/parallel/strategies/tsp/tsp_grad_ring.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"

namespace origami::parallel {

namespace {
MlpWeights weights_of(const float* p, std::int64_t ffn, std::int64_t h) {
  return {p, float_at(p, ffn * h), float_at(p, 2 * ffn * h)};
}
}  // namespace

std::int64_t TspOps::mlp_floats() const { return tsp_mlp_shard_floats(rank_shapes()); }

void TspOps::pack_mlp_shard(std::int64_t l, float* out) const {
  const LayerTensors& L = params_.layers[static_cast<std::size_t>(l)];
  for (const Tensor* t : {&L.w_gate, &L.w_up, &L.w_down}) {
    copy_floats(out, t->f32(), t->numel());
    out += t->numel();
  }
}

void TspOps::mlp_forward(std::int64_t l, const float* n, MlpSaved& s, float* x) {
  const std::int64_t R = rows(), h = config_.hidden_size, ffn = config_.intermediate_size / size_;
  const std::int64_t F = mlp_floats();
  Tensor cur(tracker_, MemCategory::CommBuffers, {F}),
      next(tracker_, MemCategory::CommBuffers, {F});
  pack_mlp_shard(l, cur.f32());
  s.a = Tensor(tracker_, MemCategory::Activations, {size_, R, ffn});
  s.u = Tensor(tracker_, MemCategory::Activations, {size_, R, ffn});
  for (int t = 0; t < size_; ++t) {
    const int shard = (rank_ + t) % size_;
    Hop hop;
    if (t + 1 < size_) hop = ring_hop(cur.f32(), next.f32(), F, t);
    // mlp_block_forward, with the gate/up pre-activations written straight into this shard's
    // slot of the saved tensors (no second copy at the peak).
    const MlpWeights w = weights_of(cur.f32(), ffn, h);
    float* a = float_at(s.a.f32(), shard * R * ffn);
    float* u = float_at(s.u.f32(), shard * R * ffn);
    kernels::linear_forward(R, h, ffn, n, w.w_gate, a);
    kernels::linear_forward(R, h, ffn, n, w.w_up, u);
    {
      Tensor gated(tracker_, MemCategory::Workspace, {R, ffn});
      kernels::swiglu_forward(R * ffn, a, u, gated.f32());
      kernels::linear_forward(R, ffn, h, gated.f32(), w.w_down, x, /*accumulate=*/true);
    }
    hop.wait();
    std::swap(cur, next);
  }
}

void TspOps::mlp_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dx, float* dn) {
  const std::int64_t R = rows(), h = config_.hidden_size, ffn = config_.intermediate_size / size_;
  const MlpDims dims{.rows = R, .hidden = h, .ffn = ffn};
  LayerTensors& G = grads_.layers[static_cast<std::size_t>(l)];
  GradRing ring(bcast_, mlp_floats(), tracker_);
  pack_mlp_shard(l, ring.weights());
  const bool saved = s.a.defined();
  for (int t = 0; t < size_; ++t) {
    const int shard = (rank_ + t) % size_;
    float* delta = ring.begin_step();  // this rank's contribution; the accumulator is in flight
    const MlpWeights w = weights_of(ring.weights(), ffn, h);
    MlpSaved g;
    if (saved) {
      g.a = Tensor(tracker_, MemCategory::Workspace, {R, ffn});
      g.u = Tensor(tracker_, MemCategory::Workspace, {R, ffn});
      copy_floats(g.a.f32(), float_at(s.a.f32(), shard * R * ffn), R * ffn);
      copy_floats(g.u.f32(), float_at(s.u.f32(), shard * R * ffn), R * ffn);
    } else {
      mlp_block_recompute(dims, n, w, tracker_, g);  // recompute policies mlp and full
    }
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
