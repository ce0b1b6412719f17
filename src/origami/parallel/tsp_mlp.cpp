// TSP gated MLP, ring schedule (tsp_ops.h table). The packed shard M_j = [gate_j | up_j |
// down_j] travels rank -> rank-1: at step t rank r holds M_{(r+t) mod D} and adds that shard's
// partial output for its own tokens; the next hop is posted before the GEMMs and waited
// after, and no all-reduce is needed (each rank sums its own rows over all shards). Backward
// rings [M_s | dM_s]: each rank adds its tokens' contribution to the accumulator it holds,
// then passes it on with the weights; after D hops the accumulator is home.
#include <cstring>
#include <utility>

#include "origami/core/float_ops.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/swiglu.h"
#include "origami/parallel/tsp_ops.h"

namespace origami::parallel {

namespace {
MlpWeights weights_of(const float* p, std::int64_t ffn, std::int64_t h) {
  return {p, float_at(p, ffn * h), float_at(p, 2 * ffn * h)};
}
}  // namespace

std::int64_t TspOps::mlp_floats() const {
  return 3 * (config_.intermediate_size / size_) * config_.hidden_size;
}

void TspOps::mlp_forward(std::int64_t l, const float* n, MlpSaved& s, float* x) {
  const std::int64_t R = rows(), h = config_.hidden_size, ffn = config_.intermediate_size / size_;
  const std::int64_t F = mlp_floats();
  const LayerTensors& L = params_.layers[static_cast<std::size_t>(l)];
  Tensor cur(tracker_, MemCategory::CommBuffers, {F}),
      next(tracker_, MemCategory::CommBuffers, {F});
  float* p = cur.f32();
  for (const Tensor* t : {&L.w_gate, &L.w_up, &L.w_down}) {
    copy_floats(p, t->f32(), t->numel());
    p = float_at(p, t->numel());
  }
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
  const std::int64_t F = mlp_floats();
  const MlpDims dims{.rows = R, .hidden = h, .ffn = ffn};
  const LayerTensors& L = params_.layers[static_cast<std::size_t>(l)];
  LayerTensors& G = grads_.layers[static_cast<std::size_t>(l)];
  // [weights | gradient accumulator] travel together.
  Tensor cur(tracker_, MemCategory::CommBuffers, {2 * F});
  Tensor next(tracker_, MemCategory::CommBuffers, {2 * F});
  cur.zero();
  float* p = cur.f32();
  for (const Tensor* t : {&L.w_gate, &L.w_up, &L.w_down}) {
    copy_floats(p, t->f32(), t->numel());
    p = float_at(p, t->numel());
  }
  const bool saved = s.a.defined();
  for (int t = 0; t < size_; ++t) {
    const int shard = (rank_ + t) % size_;
    // The incoming shard and accumulator are in flight while this one is used: the receive
    // is posted first; the send waits for this rank's contribution.
    comm::Handle recv;
    if (size_ > 1 && t + 1 < size_)
      recv = bcast_.irecv(comm::Buffer(next.f32(), 2 * F, DType::F32), (rank_ + 1) % size_, t);
    const MlpWeights w = weights_of(cur.f32(), ffn, h);
    MlpSaved g;
    if (saved) {
      g.a = Tensor(tracker_, MemCategory::Workspace, {R, ffn});
      g.u = Tensor(tracker_, MemCategory::Workspace, {R, ffn});
      copy_floats(g.a.f32(), float_at(s.a.f32(), shard * R * ffn), R * ffn);
      copy_floats(g.u.f32(), float_at(s.u.f32(), shard * R * ffn), R * ffn);
    } else {
      mlp_block_recompute(dims, n, w, tracker_, g);  // recompute policies mlp and full
    }
    float* acc = float_at(cur.f32(), F);
    mlp_block_backward(dims, n, w, g, dx, tracker_, dn,
                       {acc, float_at(acc, ffn * h), float_at(acc, 2 * ffn * h)});
    if (size_ > 1) {
      // After the last step only the accumulator makes the final hop home.
      const bool last = t + 1 == size_;
      const int dst = (rank_ + size_ - 1) % size_;
      comm::Handle send;
      if (last) {
        recv = bcast_.irecv(comm::Buffer(float_at(next.f32(), F), F, DType::F32),
                            (rank_ + 1) % size_, t);
        send = bcast_.isend(comm::ConstBuffer(acc, F, DType::F32), dst, t);
      } else {
        send = bcast_.isend(comm::ConstBuffer(cur.f32(), 2 * F, DType::F32), dst, t);
      }
      // The outgoing pair and the incoming one travel together; cur is reused only after both.
      recv.wait();
      send.wait();
      std::swap(cur, next);
    }
  }
  // cur now holds this rank's own shard's accumulator (D hops, or none when D = 1).
  const float* acc = float_at(cur.f32(), F);
  for (Tensor* t : {&G.w_gate, &G.w_up, &G.w_down}) {
    add_floats(t->f32(), acc, t->numel());
    acc = float_at(acc, t->numel());
  }
  s = MlpSaved();
}

}  // namespace origami::parallel
