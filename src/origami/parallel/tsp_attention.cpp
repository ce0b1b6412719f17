// TSP attention, broadcast schedule (tsp_ops.h table). For each head group j = 0..D-1 the
// owner's packed shard P_j = [W_Q,j | W_K,j | W_V,j | W_O,j] is broadcast in one message (the
// next one is prefetched on the duplicate communicator while P_j is used); every rank
// projects its own tokens, all-gathers the group's K/V in rank order, attends on global
// positions and accumulates its partial output through W_O,j. Saved per group (concatenated
// group-major): q, k, v, out, lse of the rank's tokens only, so 1/D of one device's.
#include <cstring>

#include "origami/core/float_ops.h"
#include "origami/parallel/tsp_ops.h"

namespace origami::parallel {

namespace {

struct Packed {
  const float *wq, *wk, *wv, *wo;
};
Packed unpack(const float* p, std::int64_t qd, std::int64_t kvd, std::int64_t h) {
  return {p, float_at(p, qd * h), float_at(p, (qd + kvd) * h), float_at(p, (qd + 2 * kvd) * h)};
}

Tensor copy_out(MemoryTracker& tracker, const Tensor& src, std::int64_t block, Shape shape) {
  Tensor t(tracker, MemCategory::Workspace, shape);
  copy_floats(t.f32(), float_at(src.f32(), block * t.numel()), t.numel());
  return t;
}

}  // namespace

AttentionDims TspOps::attention_dims() const {
  return {.batch = batch_->batch,
          .seq = layout_.local_seq(),
          .hidden = config_.hidden_size,
          .heads = config_.num_attention_heads / size_,
          .kv_heads = config_.num_key_value_heads / size_,
          .head_dim = config_.head_dim()};
}

std::int64_t TspOps::attention_floats() const {
  const AttentionDims d = attention_dims();
  return 2 * (d.heads + d.kv_heads) * d.head_dim * d.hidden;
}

comm::Handle TspOps::broadcast_attention_shard(std::int64_t l, int owner, Tensor& buf) {
  if (owner == rank_) {
    const LayerTensors& L = params_.layers[static_cast<std::size_t>(l)];
    float* p = buf.f32();
    for (const Tensor* t : {&L.wq, &L.wk, &L.wv, &L.wo}) {
      copy_floats(p, t->f32(), t->numel());
      p = float_at(p, t->numel());
    }
  }
  if (size_ == 1) return {};
  return bcast_.ibroadcast(buf, owner);
}

void TspOps::attention_forward(std::int64_t l, const float* n, AttentionSaved& s, float* x) {
  const AttentionDims d = attention_dims();
  const std::int64_t R = rows(), qd = d.heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  const int D = size_;
  s.q = Tensor(tracker_, MemCategory::Activations, {D, R, qd});
  s.k = Tensor(tracker_, MemCategory::Activations, {D, R, kvd});
  s.v = Tensor(tracker_, MemCategory::Activations, {D, R, kvd});
  s.out = Tensor(tracker_, MemCategory::Activations, {D, R, qd});
  s.lse = Tensor(tracker_, MemCategory::Activations, {D, d.batch, d.heads, d.seq});
  Tensor buf[2] = {Tensor(tracker_, MemCategory::CommBuffers, {attention_floats()}),
                   Tensor(tracker_, MemCategory::CommBuffers, {attention_floats()})};
  comm::Handle pending = broadcast_attention_shard(l, 0, buf[0]);
  const SequenceAxis axis{&axis_, layout_.positions().data(), &kv_positions_};
  for (int j = 0; j < D; ++j) {
    pending.wait();
    // Prefetch P_{j+1} while P_j is used (a different communicator than the K/V gathers).
    if (j + 1 < D) pending = broadcast_attention_shard(l, j + 1, buf[(j + 1) % 2]);
    const Packed p = unpack(buf[j % 2].f32(), qd, kvd, d.hidden);
    const AttentionSavedView into{float_at(s.q.f32(), j * R * qd), float_at(s.k.f32(), j * R * kvd),
                                  float_at(s.v.f32(), j * R * kvd),
                                  float_at(s.out.f32(), j * R * qd),
                                  float_at(s.lse.f32(), j * d.batch * d.heads * d.seq)};
    cp_attention_forward_into(d, n, {p.wq, p.wk, p.wv, p.wo}, axis, rope_, tracker_, into, x);
  }
}

void TspOps::attention_backward(std::int64_t l, const float* n, const AttentionSaved& s,
                                const float* dx, float* dn) {
  const AttentionDims d = attention_dims();
  const std::int64_t R = rows(), h = d.hidden, qd = d.heads * d.head_dim,
                     kvd = d.kv_heads * d.head_dim;
  const int D = size_;
  const std::int64_t F = attention_floats();
  Tensor buf[2] = {Tensor(tracker_, MemCategory::CommBuffers, {F}),
                   Tensor(tracker_, MemCategory::CommBuffers, {F})};
  Tensor grad(tracker_, MemCategory::CommBuffers, {F});   // this rank's part of dP_j
  Tensor total(tracker_, MemCategory::CommBuffers, {F});  // dP_j summed, on its owner
  comm::Handle pending = broadcast_attention_shard(l, 0, buf[0]);
  const SequenceAxis axis{&axis_, layout_.positions().data(), &kv_positions_};
  LayerTensors& G = grads_.layers[static_cast<std::size_t>(l)];
  for (int j = 0; j < D; ++j) {
    pending.wait();
    if (j + 1 < D) pending = broadcast_attention_shard(l, j + 1, buf[(j + 1) % 2]);
    const Packed p = unpack(buf[j % 2].f32(), qd, kvd, h);
    AttentionSaved g;
    g.q = copy_out(tracker_, s.q, j, {R, qd});
    g.k = copy_out(tracker_, s.k, j, {R, kvd});
    g.v = copy_out(tracker_, s.v, j, {R, kvd});
    g.out = copy_out(tracker_, s.out, j, {R, qd});
    g.lse = copy_out(tracker_, s.lse, j, {d.batch, d.heads, d.seq});
    grad.zero();
    float* dp = grad.f32();
    const AttentionGrads dg{dp, float_at(dp, qd * h), float_at(dp, (qd + kvd) * h),
                            float_at(dp, (qd + 2 * kvd) * h)};
    cp_attention_backward(d, n, {p.wq, p.wk, p.wv, p.wo}, axis, rope_, g, dx, tracker_, dn, dg);
    // Every rank's contribution to head group j's weight gradient, summed on its owner.
    float* sum = grad.f32();
    if (D > 1) {
      axis_.reduce(grad, total, j);
      sum = total.f32();
    }
    if (j == rank_) {
      const float* q = sum;
      for (Tensor* t : {&G.wq, &G.wk, &G.wv, &G.wo}) {
        add_floats(t->f32(), q, t->numel());
        q = float_at(q, t->numel());
      }
    }
  }
}

}  // namespace origami::parallel
