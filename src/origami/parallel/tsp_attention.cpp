// TSP attention, broadcast schedule (tsp_ops.h table). For each head group j = 0..D-1 the
// owner's packed shard P_j = [W_Q,j | W_K,j | W_V,j | W_O,j] is broadcast in one message (the
// next one is prefetched on the duplicate communicator while P_j is used, and after the last
// group the next attention call's P_0: it runs behind the MLP); every rank projects its own
// tokens, all-gathers the group's K/V in rank order while it attends its own rows, attends the
// other ranks' rows on global positions, merges by log-sum-exp and accumulates its partial
// output through W_O,j (attention_cp.h). Saved per group (concatenated group-major): q, k, v,
// out, lse of the rank's tokens only, so 1/D of one device's. In backward the packed
// gradient dP_j is reduced to its owner asynchronously on grad_comm() and waited two groups
// later (two local dP buffers).
#include <utility>

#include "origami/core/float_ops.h"
#include "origami/kernels/gemm.h"
#include "origami/parallel/tsp_ops.h"

namespace origami::parallel {

namespace {

struct Packed {
  const float *wq, *wk, *wv, *wo;
};
Packed unpack(const float* p, std::int64_t qd, std::int64_t kvd, std::int64_t h) {
  return {p, p + qd * h, p + (qd + kvd) * h, p + (qd + 2 * kvd) * h};
}

Tensor copy_out(MemoryTracker& tracker, const Tensor& src, std::int64_t block, Shape shape) {
  Tensor t(tracker, MemCategory::Workspace, shape);
  copy_floats(t.f32(), src.f32() + block * t.numel(), t.numel());
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
  if (!buf.defined()) buf = Tensor(tracker_, MemCategory::CommBuffers, {attention_floats()});
  if (owner == rank_) {
    const LayerTensors& L = params_.layers[static_cast<std::size_t>(l)];
    float* p = buf.f32();
    for (const Tensor* t : {&L.wq, &L.wk, &L.wv, &L.wo}) {
      copy_floats(p, t->f32(), t->numel());
      p += t->numel();
    }
  }
  if (size_ == 1) return {};
  return bcast_.ibroadcast(buf, owner);
}

comm::Handle TspOps::first_attention_shard(std::int64_t l, Tensor& buf) {
  if (prefetch_.layer == l) {
    buf = std::move(prefetch_.buf);
    comm::Handle h = std::move(prefetch_.handle);
    prefetch_ = ShardPrefetch();
    return h;
  }
  // A prefetch for another layer: only a caller that does not follow the driver's layer order
  // gets here (every rank the same way); drain it so that nothing stays in flight.
  drop_prefetch();
  return broadcast_attention_shard(l, 0, buf);
}

void TspOps::prefetch_attention_shard(std::int64_t l, Tensor buf) {
  drop_prefetch();
  if (l < 0 || l >= config_.num_hidden_layers) return;
  prefetch_.layer = l;
  prefetch_.buf = std::move(buf);
  prefetch_.handle = broadcast_attention_shard(l, 0, prefetch_.buf);
}

void TspOps::drop_prefetch() {
  prefetch_.handle.wait();
  prefetch_ = ShardPrefetch();
}

TspOps::~TspOps() {
  try {
    drop_prefetch();
  } catch (...) {  // NOLINT(bugprone-empty-catch): an error is already unwinding the step
  }
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
  Tensor buf[2];
  comm::Handle pending = first_attention_shard(l, buf[0]);
  const SequenceAxis axis{&axis_, layout_.positions().data(), &kv_positions_};
  // Group j's output projection y += out_j W_O,j is deferred into group j+1's K/V gather
  // window; W_O,j is kept aside because P_j's buffer receives P_{j+2} meanwhile. (The
  // projections still add into x in group order.)
  Tensor wo(tracker_, MemCategory::Workspace, {d.hidden, qd});
  auto project_out = [&](int j) {
    kernels::linear_forward(R, qd, d.hidden, s.out.f32() + j * R * qd, wo.f32(), x,
                            /*accumulate=*/true);
  };
  for (int j = 0; j < D; ++j) {
    pending.wait();
    // Prefetch P_{j+1} while P_j is used (a different communicator than the K/V gathers);
    // after the last group, the next attention call's P_0 (it runs behind this group and the
    // MLP): layer l+1 in a forward, l itself when this is full recompute inside backward.
    if (j + 1 < D)
      pending = broadcast_attention_shard(l, j + 1, buf[(j + 1) % 2]);
    else
      prefetch_attention_shard(in_backward_ ? l : l + 1, std::move(buf[(j + 1) % 2]));
    const Packed p = unpack(buf[j % 2].f32(), qd, kvd, d.hidden);
    const AttentionSavedView into{s.q.f32() + j * R * qd, s.k.f32() + j * R * kvd,
                                  s.v.f32() + j * R * kvd, s.out.f32() + j * R * qd,
                                  s.lse.f32() + j * d.batch * d.heads * d.seq};
    cp_attention_forward_into(d, n, {p.wq, p.wk, p.wv, p.wo}, axis, rope_, tracker_, into,
                              /*y=*/nullptr, [&] {
                                if (j > 0) project_out(j - 1);
                              });
    copy_floats(wo.f32(), p.wo, d.hidden * qd);
  }
  project_out(D - 1);
}

void TspOps::attention_backward(std::int64_t l, const float* n, const AttentionSaved& s,
                                const float* dx, float* dn) {
  const AttentionDims d = attention_dims();
  const std::int64_t R = rows(), h = d.hidden, qd = d.heads * d.head_dim,
                     kvd = d.kv_heads * d.head_dim;
  const int D = size_;
  const std::int64_t F = attention_floats();
  Tensor buf[2];
  comm::Handle pending = first_attention_shard(l, buf[0]);
  // This rank's part of dP_j, double-buffered: group j's reduce to its owner is in flight
  // during group j+1 and waited before the buffer is reused at j+2 (or at the end).
  Tensor grad[2] = {Tensor(tracker_, MemCategory::CommBuffers, {F}),
                    D > 1 ? Tensor(tracker_, MemCategory::CommBuffers, {F}) : Tensor()};
  Tensor total(tracker_, MemCategory::CommBuffers, {D > 1 ? F : 0});  // dP_rank summed here
  comm::Handle reduce[2];
  int reduced[2] = {-1, -1};  // the head group each reduce carries
  LayerTensors& G = grads_.layers[static_cast<std::size_t>(l)];
  auto add_to_grads = [&](const float* sum) {
    for (Tensor* t : {&G.wq, &G.wk, &G.wv, &G.wo}) {
      add_floats(t->f32(), sum, t->numel());
      sum += t->numel();
    }
  };
  auto finish_reduce = [&](int slot) {
    reduce[slot].wait();
    if (reduced[slot] == rank_) add_to_grads(total.f32());
    reduced[slot] = -1;
  };
  const SequenceAxis axis{&axis_, layout_.positions().data(), &kv_positions_};
  // The K/V re-gather needs only the saved k, v: group j+1's is started before group j's
  // backward, so it runs behind the whole group (one more gather's staging resident).
  KvGatherInFlight next;
  auto start_gather = [&](int j) {
    if (D > 1)
      next = cp_start_kv_gather(d, axis, s.k.f32() + j * R * kvd, s.v.f32() + j * R * kvd,
                                tracker_);
  };
  start_gather(0);
  for (int j = 0; j < D; ++j) {
    KvGatherInFlight gathered = std::move(next);
    next = KvGatherInFlight();
    if (j + 1 < D) start_gather(j + 1);
    pending.wait();
    if (j + 1 < D)
      pending = broadcast_attention_shard(l, j + 1, buf[(j + 1) % 2]);
    else  // the previous layer's P_0, for its backward (or its recomputed forward)
      prefetch_attention_shard(l - 1, std::move(buf[(j + 1) % 2]));
    const Packed p = unpack(buf[j % 2].f32(), qd, kvd, h);
    AttentionSaved g;
    g.q = copy_out(tracker_, s.q, j, {R, qd});
    g.k = copy_out(tracker_, s.k, j, {R, kvd});
    g.v = copy_out(tracker_, s.v, j, {R, kvd});
    g.out = copy_out(tracker_, s.out, j, {R, qd});
    g.lse = copy_out(tracker_, s.lse, j, {d.batch, d.heads, d.seq});
    const int slot = j % 2;
    finish_reduce(slot);  // group j-2's reduce used this buffer
    grad[slot].zero();
    float* dp = grad[slot].f32();
    const AttentionGrads dg{dp, dp + qd * h, dp + (qd + kvd) * h, dp + (qd + 2 * kvd) * h};
    cp_attention_backward(d, n, {p.wq, p.wk, p.wv, p.wo}, axis, rope_, g, dx, tracker_, dn, dg,
                          &gathered);
    // Every rank's contribution to head group j's weight gradient, summed on its owner, on
    // the gradients' own communicator so that the next group's K/V gather does not queue
    // behind it.
    if (D > 1) {
      reduce[slot] = grads_comm_.ireduce(grad[slot], total, j);
      reduced[slot] = j;
    } else {
      add_to_grads(dp);
    }
  }
  finish_reduce(0);
  finish_reduce(1);
}

}  // namespace origami::parallel
