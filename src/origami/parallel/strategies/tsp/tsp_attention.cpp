// TSP attention, broadcast schedule (schedule.h). For each head group j = 0..D-1 the
// owner's packed shard P_j = [W_Q,j | W_K,j | W_V,j | W_O,j] is broadcast in one message on the
// duplicate communicator, two groups ahead of its use (the next attention call's P_0 and P_1
// after this call's last two groups: they run behind the MLP); every rank projects its own
// tokens, all-gathers the group's K/V in rank order while it attends its own rows, attends the
// other ranks' rows on global positions, merges by log-sum-exp and accumulates its partial
// output through W_O,j (attention_cp.h); head groups are pipelined around the gathers. Saved
// per group (concatenated group-major): q, k, v, out, lse of the rank's tokens only, so 1/D of
// one device's. In backward the packed gradient dP_j is reduced to its owner asynchronously on
// grad_comm() and waited three groups later (GradReduceChain, grad_reduce.h).
#include <algorithm>
#include <tuple>
#include <utility>

#include "origami/core/float_ops.h"
#include "origami/kernels/gemm.h"
#include "origami/model/weights_bf16.h"
#include "origami/parallel/strategies/tsp/grad_reduce.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"

namespace origami::parallel {

namespace {

// A packed shard P_j in its buffer's dtype (fp32, or bf16: the bf16 inference's prefill and
// training's bf16 compute copy).
AttentionWeights unpack(const Tensor& buf, std::int64_t qd, std::int64_t kvd, std::int64_t h) {
  const kernels::WeightView p(buf.raw(), buf.dtype());
  return {p, p.at(qd * h), p.at((qd + kvd) * h), p.at((qd + 2 * kvd) * h)};
}
// Head group j's slice of side-by-side saved tensors (View: writable or read-only pointers).
template <class View, class Saved>
View group_slice(Saved& s, const AttentionDims& d, std::int64_t R, int j) {
  const std::int64_t qd = d.heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  return {float_at(s.q.f32(), j * R * qd), float_at(s.k.f32(), j * R * kvd),
          float_at(s.v.f32(), j * R * kvd), float_at(s.out.f32(), j * R * qd),
          float_at(s.lse.f32(), j * d.batch * d.heads * d.seq)};
}
// A packed gradient dP_j, laid out as P_j (unpack).
AttentionGrads packed_grads(float* p, std::int64_t qd, std::int64_t kvd, std::int64_t h) {
  return {p, float_at(p, qd * h), float_at(p, (qd + kvd) * h), float_at(p, (qd + 2 * kvd) * h)};
}

}  // namespace

AttentionDims TspOps::attention_dims() const {
  return {.batch = batch_->batch,
          .seq = layout_.local_seq(),
          .hidden = config_.hidden_size,
          .heads = config_.num_attention_heads / size_,
          .kv_heads = kv_heads_per_rank(config_, size_),
          .head_dim = config_.head_dim(),
          .documents = local_documents(*batch_),
          .kv = activation_dtype()};
}

std::int64_t TspOps::attention_floats() const {
  return tsp_attention_shard_floats(rank_shapes());
}

AttentionSavedView TspOps::saved_group(AttentionSaved& s, int j) const {
  return group_slice<AttentionSavedView>(s, attention_dims(), rows(), j);
}

AttentionSavedReadView TspOps::saved_group(const AttentionSaved& s, int j) const {
  return group_slice<AttentionSavedReadView>(s, attention_dims(), rows(), j);
}

comm::Handle TspOps::broadcast_attention_shard(std::int64_t l, int owner, Tensor& buf) {
  const LayerTensors& L = matrices().layers[static_cast<std::size_t>(l)];
  // Packed and sent in the weights' own dtype: a bf16 shard (inference, or training's compute
  // copy) moves half the bytes and its products read it as it is (kernels/gemm.h).
  if (!buf.defined() || buf.dtype() != L.wq.dtype())
    buf = Tensor(tracker_, MemCategory::CommBuffers, L.wq.dtype(), {attention_floats()});
  if (owner == rank_) {
    std::int64_t at = 0;
    for (const Tensor* t : {&L.wq, &L.wk, &L.wv, &L.wo}) {
      copy_elements(*t, 0, buf, at, t->numel());
      at += t->numel();
    }
  }
  if (size_ == 1) return {};
  return bcast_.ibroadcast(buf, owner);
}

void TspOps::first_attention_shards(std::int64_t l, Tensor (&buf)[kTspShardBuffers],
                                    comm::Handle (&handle)[kTspShardBuffers]) {
  int got = 0;
  if (prefetch_.layer == l) {
    got = prefetch_.count;
    for (int i = 0; i < got; ++i) {
      buf[i] = std::move(prefetch_.buf[i]);
      handle[i] = std::move(prefetch_.handle[i]);
    }
    prefetch_ = ShardPrefetch();
  } else {
    // A prefetch for another layer: only a caller that does not follow the driver's layer
    // order gets here (every rank the same way); drain it so that nothing stays in flight.
    drop_prefetch();
  }
  for (int j = got; j < std::min(size_, kTspShardBuffers); ++j)
    handle[j] = broadcast_attention_shard(l, j, buf[j]);
}

void TspOps::prefetch_attention_shard(std::int64_t l, int j, Tensor buf) {
  if (j == 0) drop_prefetch();
  // (A layer whose weights are empty here is another pipeline stage's: nothing to prefetch.)
  if (l < 0 || l >= config_.num_hidden_layers ||
      matrices().layers[static_cast<std::size_t>(l)].wq.numel() == 0 ||
      j >= std::min(size_, kTspPrefetchedShards) ||
      prefetch_.count != j ||
      (j > 0 && prefetch_.layer != l))
    return;
  prefetch_.layer = l;
  prefetch_.buf[j] = std::move(buf);
  prefetch_.handle[j] = broadcast_attention_shard(l, j, prefetch_.buf[j]);
  prefetch_.count = j + 1;
}

void TspOps::drop_prefetch() {
  for (comm::Handle& h : prefetch_.handle) h.wait();
  prefetch_ = ShardPrefetch();
}

TspOps::~TspOps() {
  try {
    drop_prefetch();
  } catch (...) {  // NOLINT(bugprone-empty-catch): an error is already unwinding the step
  }
}

void TspOps::attention_forward(std::int64_t l, const float* n, AttentionSaved& s, float* x,
                               const ForwardStep& step) {
  const AttentionDims d = attention_dims();
  const std::int64_t R = rows(), qd = d.heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  const int D = size_;
  s.q = Tensor(tracker_, MemCategory::Activations, {D, R, qd});
  s.k = Tensor(tracker_, MemCategory::Activations, {D, R, kvd});
  s.v = Tensor(tracker_, MemCategory::Activations, {D, R, kvd});
  s.out = Tensor(tracker_, MemCategory::Activations, {D, R, qd});
  s.lse = Tensor(tracker_, MemCategory::Activations, {D, d.batch, d.heads, d.seq});
  const SequenceAxis axis{&axis_, query_positions(), &key_positions(), nullptr, nullptr,
                          row_documents(*batch_), layout_.seq()};
  // Pipelined over head groups (docs/design.md §3.1 (a) with (b)): group j+1 is projected and its
  // K/V gathers started while group j's are still in flight (after j's local rows), so each
  // gather runs behind the rest of one group and the local rows of the next. A shard is
  // needed only to project its group (W_O,j is kept aside for the output projection, which
  // is deferred into the next group's gather window), so its buffer then receives the shard
  // two ahead: P_{k+2} after projecting k, or, when k+2 >= D, the next attention call's P_0
  // and P_1 (the driver's step.next_attention_layer), which run behind the last groups and
  // the MLP. Projections still add into x in group order.
  Tensor buf[kTspShardBuffers];
  comm::Handle shard[kTspShardBuffers];
  first_attention_shards(l, buf, shard);
  const DType wdt = matrices().layers[static_cast<std::size_t>(l)].wo.dtype();
  Tensor wo[2] = {Tensor(tracker_, MemCategory::Workspace, wdt, {d.hidden, qd}),
                  D > 1 ? Tensor(tracker_, MemCategory::Workspace, wdt, {d.hidden, qd}) : Tensor()};
  KvGatherInFlight kv[2];
  const auto view = [&](int j) { return saved_group(s, j); };
  auto begin = [&](int k) {
    const int b = k % kTspShardBuffers;
    shard[b].wait();
    const AttentionWeights p = unpack(buf[b], qd, kvd, d.hidden);
    kv[b] = cp_attention_forward_begin(d, n, p, axis, rope_, tracker_, view(k));
    copy_elements(buf[b], (qd + 2 * kvd) * d.hidden, wo[b], 0, d.hidden * qd);
    if (k + kTspShardBuffers < D)
      shard[b] = broadcast_attention_shard(l, k + kTspShardBuffers, buf[b]);
    else  // P_0 (k = D-2), then P_1 (k = D-1) of the next attention call
      prefetch_attention_shard(step.next_attention_layer, k + kTspShardBuffers - D,
                               std::move(buf[b]));
  };
  auto project_out = [&](int j) {
    kernels::linear_forward(R, qd, d.hidden, float_at(s.out.f32(), j * R * qd),
                            kernels::WeightView(wo[j % 2].raw(), wdt), x, /*accumulate=*/true);
  };
  begin(0);
  for (int j = 0; j < D; ++j) {
    SequenceAxis at = axis;  // prefill keeps its own head group's gathered K/V
    if (j == rank_ && kv_keep_) std::tie(at.keep_k, at.keep_v) = kv_keep_(l);
    cp_attention_forward_finish(d, at, tracker_, view(j), kv[j % 2], [&] {
      if (j > 0) project_out(j - 1);
      if (j + 1 < D) begin(j + 1);  // after project_out: wo[(j+1) % 2] is wo[(j-1) % 2]
    });
  }
  project_out(D - 1);
}

void TspOps::attention_backward(std::int64_t l, const float* n, const AttentionSaved& s,
                                const float* dx, float* dn) {
  const AttentionDims d = attention_dims();
  const std::int64_t R = rows(), h = d.hidden, qd = d.heads * d.head_dim,
                     kvd = d.kv_heads * d.head_dim;
  const int D = size_;
  Tensor buf[kTspShardBuffers];
  comm::Handle shard[kTspShardBuffers];
  first_attention_shards(l, buf, shard);
  // dP_j, this rank's part of head group j's packed gradient, summed on its owner behind the
  // following groups (grad_reduce.h); the owner adds the sum into its shard's gradients.
  LayerTensors& G = grads_.layers[static_cast<std::size_t>(l)];
  GradReduceChain reduce(grads_comm_, attention_floats(), tracker_, [&G](const float* sum) {
    for (Tensor* t : {&G.wq, &G.wk, &G.wv, &G.wo}) {
      add_floats(t->f32(), sum, t->numel());
      sum += t->numel();
    }
  });
  const SequenceAxis axis{&axis_, query_positions(), &key_positions(), nullptr, nullptr,
                          row_documents(*batch_), layout_.seq()};
  // Pipelining across head groups (D > 1), all inside group j's backward after its local
  // rows' attention backward (the hook of cp_attention_backward):
  //  * group j-1's dK/dV reduce-scatters, left in flight by its call, are waited there and the
  //    K/V half of its projection backward runs (W_K, W_V of P_{j-1} kept aside: P_{j-1}'s
  //    buffer is receiving P_{j+1}); then dP_{j-1} is complete and its reduce is posted;
  //  * group j+1's K/V re-gather is started (it needs only the saved k, v), so it runs behind
  //    the rest of group j.
  KvGatherInFlight next;
  KvGradsInFlight kv_grads[2];  // group j's dK/dV reduce-scatters, by j % 2
  Tensor wkv(tracker_, MemCategory::Workspace, matrices().layers[static_cast<std::size_t>(l)].wk.dtype(),
             {D > 1 ? 2 * kvd * h : 0});  // W_K, W_V of j-1, in the weights' dtype
  int prev = -1;  // the group whose K/V half is still to do
  const auto start_gather = [&](int j) {
    next = cp_start_kv_gather(d, axis, float_at(s.k.f32(), j * R * kvd),
                              float_at(s.v.f32(), j * R * kvd), tracker_);
  };
  const auto finish_prev = [&] {
    if (prev < 0) return;
    const AttentionGrads dg = packed_grads(reduce.slot(prev), qd, kvd, h);
    const kernels::WeightView kv = weight_view(wkv);
    cp_attention_backward_finish(d, n, {nullptr, kv, kv.at(kvd * h), nullptr}, axis, rope_,
                                 kv_grads[prev % 2], dn, dg);
    reduce.post(prev);  // on grad_comm(), so the K/V collectives do not queue behind it
    prev = -1;
  };
  if (D > 1) start_gather(0);
  for (int j = 0; j < D; ++j) {
    KvGatherInFlight gathered = std::exchange(next, KvGatherInFlight());
    shard[j % kTspShardBuffers].wait();  // P_j (P_{j+1} is in flight in the other buffer)
    const AttentionWeights p = unpack(buf[j % kTspShardBuffers], qd, kvd, h);
    const AttentionGrads dg = packed_grads(reduce.begin(j), qd, kvd, h);
    CpBackwardPipeline pipe;
    if (D > 1) {
      pipe.gathered = &gathered;
      pipe.deferred = &kv_grads[j % 2];
      pipe.while_gathering = [&] {
        finish_prev();
        if (j + 1 < D) start_gather(j + 1);
      };
    }
    // Head group j's slice of the side-by-side saved tensors, read in place.
    cp_attention_backward(d, n, p, axis, rope_, saved_group(s, j), dx, tracker_, dn, dg, pipe);
    if (D > 1) {
      // W_K, W_V are adjacent in P_j.
      copy_elements(buf[j % kTspShardBuffers], qd * h, wkv, 0, 2 * kvd * h);
      prev = j;
    } else {
      reduce.post(j);
    }
    // P_j is done with: its buffer receives P_{j+2}, or the previous layer's P_0, P_1 for its
    // backward (or its recomputed forward).
    const int b = j % kTspShardBuffers;
    if (j + kTspShardBuffers < D)
      shard[b] = broadcast_attention_shard(l, j + kTspShardBuffers, buf[b]);
    else
      prefetch_attention_shard(l - 1, j + kTspShardBuffers - D, std::move(buf[b]));
  }
  finish_prev();
  reduce.finish();
}

}  // namespace origami::parallel
