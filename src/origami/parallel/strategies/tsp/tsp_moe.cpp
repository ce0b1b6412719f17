// TSP mixture-of-experts MLP, weight-ring schedule (docs/moe.md): every expert is sharded
// 1/D per rank exactly as the dense MLP (rows F_j of w1/w3, columns F_j of w2), and the packed
// shard of ALL experts, [gate_j,e | up_j,e | down_j,e] for e = 0 .. E-1, travels the same ring
// as the dense MLP's M_j (WeightRing forward, GradRing backward: the gradient travels with its
// weights). Tokens never leave their rank: each rank routes its own rows with the replicated
// router, and adds every shard's partial expert outputs, weighted by the routing weights, to
// its rows. The balance term's counts and probability sums are all-reduced over tsp x dp, so
// every layout computes the single device's number for the job's micro-batch.
#include <cmath>

#include "origami/core/float_ops.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/swiglu.h"
#include "origami/model/moe.h"
#include "origami/parallel/strategies/tsp/tsp_grad_ring.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"
#include "origami/parallel/strategies/tsp/weight_ring.h"

namespace origami::parallel {

namespace {
// Expert e's gate, up, down shards inside the packed buffer of all experts' shard j.
MlpWeights tsp_expert_shard(const float* p, std::int64_t e, std::int64_t ffn, std::int64_t h) {
  const float* base = float_at(p, e * 3 * ffn * h);
  return {base, float_at(base, ffn * h), float_at(base, 2 * ffn * h)};
}
MlpGrads tsp_expert_shard_grads(float* p, std::int64_t e, std::int64_t ffn, std::int64_t h) {
  float* base = float_at(p, e * 3 * ffn * h);
  return {base, float_at(base, ffn * h), float_at(base, 2 * ffn * h)};
}
}  // namespace

MoeDims TspOps::moe_dims() const {
  return {.rows = rows(),
          .hidden = config_.hidden_size,
          // The ring's shard of each expert; the expert schedule's whole experts.
          .ffn = expert_schedule() ? config_.intermediate_size : config_.intermediate_size / size_,
          .experts = config_.num_local_experts,
          .top_k = config_.num_experts_per_tok,
          .capacity_factor = 0};  // refused under TSP (validate_plan)
}

std::int64_t TspOps::moe_floats() const {
  return tsp_moe_ring_shard_floats(rank_shapes(), config_.num_local_experts);
}

void TspOps::pack_moe_shard(std::int64_t l, float* out) const {
  for (const ExpertTensors& e : params_.layers[static_cast<std::size_t>(l)].experts)
    for (const Tensor* t : {&e.w_gate, &e.w_up, &e.w_down}) {
      copy_floats(out, t->f32(), t->numel());
      out += t->numel();
    }
}

MoeRouting TspOps::moe_backward_routing(std::int64_t l, const float* n, MlpSaved& s) {
  const MoeDims d = moe_dims();
  if (!s.a.defined()) {  // recompute mlp: the logits again (the counts were kept by the forward)
    s.router_logits = Tensor(tracker_, MemCategory::Workspace, {d.rows, d.experts});
    kernels::linear_forward(d.rows, d.hidden, d.experts, n,
                            params_.layers[static_cast<std::size_t>(l)].router.f32(),
                            s.router_logits.f32());
  }
  return route_tokens(d, s.router_logits.f32());
}

// The router (replicated): this rank's tokens' part, with the balance's gradient over the
// job's micro-batch; reduce_gradients sums it over tsp x dp.
void TspOps::moe_router_backward_rows(std::int64_t l, const MoeRouting& r, const float* logits,
                                      const std::vector<double>& dweight, const float* n,
                                      float* dn) {
  moe_router_backward(moe_dims(), r, logits, dweight, moe_job_.probability_grad(l), n,
                      params_.layers[static_cast<std::size_t>(l)].router.f32(), tracker_, dn,
                      grads_.layers[static_cast<std::size_t>(l)].router.f32());
}

void TspOps::moe_forward(std::int64_t l, const float* n, MlpSaved& s, float* x) {
  if (expert_schedule()) return moe_expert_forward(l, n, s, x);
  const MoeDims d = moe_dims();
  const std::int64_t R = d.rows, h = d.hidden, ffn = d.ffn, E = d.experts;
  const LayerTensors& L = params_.layers[static_cast<std::size_t>(l)];
  s.router_logits = Tensor(tracker_, MemCategory::Activations, {R, E});
  kernels::linear_forward(R, h, E, n, L.router.f32(), s.router_logits.f32());
  const MoeRouting r = route_tokens(d, s.router_logits.f32());
  moe_job_.record(l, groups_, d, r, s.router_logits.f32());
  const std::int64_t kept = r.offset[static_cast<std::size_t>(E)];
  // Shard j's gate/up pre-activations of every kept assignment: slot j of [D, kept, ffn].
  s.a = Tensor(tracker_, MemCategory::Activations, {size_, kept, ffn});
  s.u = Tensor(tracker_, MemCategory::Activations, {size_, kept, ffn});
  std::vector<Tensor> rows_of_expert;
  for (std::int64_t e = 0; e < E; ++e)
    rows_of_expert.push_back(moe_gather_rows(d, r, e, n, tracker_));
  const std::int64_t F = moe_floats();
  WeightRing ring(bcast_, F, tracker_);
  pack_moe_shard(l, ring.weights());
  for (int t = 0; t < size_; ++t) {
    const int shard = (rank_ + t) % size_;
    ring.begin_step(F);  // every expert's shard moves on to rank-1 while this rank uses it
    for (std::int64_t e = 0; e < E; ++e) {
      const std::int64_t begin = r.offset[e], ne = r.offset[e + 1] - begin;
      if (ne == 0) continue;
      Tensor ye(tracker_, MemCategory::Workspace, {ne, h});
      const std::int64_t slot = (shard * kept + begin) * ffn;
      mlp_block_forward({.rows = ne, .hidden = h, .ffn = ffn}, rows_of_expert[e].f32(),
                        tsp_expert_shard(ring.weights(), e, ffn, h), tracker_,
                        MlpSlot{float_at(s.a.f32(), slot), float_at(s.u.f32(), slot)}, ye.f32());
      for (std::int64_t i = 0; i < ne; ++i) {  // the partial output, weighted, to its row
        const std::int64_t which = r.slot[begin + i];
        const float weight = r.weight[which];
        float* out = float_at(x, (which / d.top_k) * h);
        const float* in = float_at(ye.f32(), i * h);
        for (std::int64_t c = 0; c < h; ++c) out[c] += weight * in[c];
      }
    }
    ring.end_step();
  }
}

void TspOps::moe_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dy,
                          float* dn) {
  if (expert_schedule()) return moe_expert_backward(l, n, s, dy, dn);
  const MoeDims d = moe_dims();
  const std::int64_t R = d.rows, h = d.hidden, ffn = d.ffn, E = d.experts, k = d.top_k;
  LayerTensors& G = grads_.layers[static_cast<std::size_t>(l)];
  const bool saved = s.a.defined();
  const MoeRouting r = moe_backward_routing(l, n, s);
  const std::int64_t kept = r.offset[static_cast<std::size_t>(E)];
  std::vector<Tensor> xs, dys, dxs;  // per expert: its rows, their weighted dy, their dn
  for (std::int64_t e = 0; e < E; ++e) {
    xs.push_back(moe_gather_rows(d, r, e, n, tracker_));
    const std::int64_t begin = r.offset[e], ne = r.offset[e + 1] - begin;
    dys.emplace_back(tracker_, MemCategory::Workspace, Shape{ne, h});
    dxs.emplace_back(tracker_, MemCategory::Workspace, Shape{ne, h});
    for (std::int64_t i = 0; i < ne; ++i) {
      const std::int64_t which = r.slot[begin + i];
      const float* src = float_at(dy, (which / k) * h);
      float* dst = float_at(dys.back().f32(), i * h);
      for (std::int64_t c = 0; c < h; ++c) dst[c] = r.weight[which] * src[c];
    }
  }
  // d loss / d routing weight: dy . (the expert's output), summed over its D shards' partials.
  std::vector<double> dweight(static_cast<std::size_t>(R * k), 0.0);
  GradRing ring(bcast_, moe_floats(), tracker_);
  pack_moe_shard(l, ring.weights());
  for (int t = 0; t < size_; ++t) {
    const int shard = (rank_ + t) % size_;
    float* delta = ring.begin_step();
    for (std::int64_t e = 0; e < E; ++e) {
      const std::int64_t begin = r.offset[e], ne = r.offset[e + 1] - begin;
      if (ne == 0) continue;
      const MlpWeights w = tsp_expert_shard(ring.weights(), e, ffn, h);
      MlpSaved again;  // recompute mlp/full: this shard's gate/up as Workspace
      if (!saved) {
        again.a = Tensor(tracker_, MemCategory::Workspace, {ne, ffn});
        again.u = Tensor(tracker_, MemCategory::Workspace, {ne, ffn});
        kernels::linear_forward(ne, h, ffn, xs[e].f32(), w.w_gate, again.a.f32());
        kernels::linear_forward(ne, h, ffn, xs[e].f32(), w.w_up, again.u.f32());
      }
      const std::int64_t slot = (shard * kept + begin) * ffn;
      const float* a = saved ? float_at(s.a.f32(), slot) : again.a.f32();
      const float* u = saved ? float_at(s.u.f32(), slot) : again.u.f32();
      {  // this shard's partial output, for the routing weights' gradient
        Tensor gated(tracker_, MemCategory::Workspace, {ne, ffn});
        kernels::swiglu_forward(ne * ffn, a, u, gated.f32());
        Tensor ye(tracker_, MemCategory::Workspace, {ne, h});
        kernels::linear_forward(ne, ffn, h, gated.f32(), w.w_down, ye.f32());
        for (std::int64_t i = 0; i < ne; ++i) {
          const std::int64_t which = r.slot[begin + i];
          const float* grad = float_at(dy, (which / k) * h);
          const float* out = float_at(ye.f32(), i * h);
          double dot = 0;
          for (std::int64_t c = 0; c < h; ++c) dot += static_cast<double>(grad[c]) * out[c];
          dweight[static_cast<std::size_t>(which)] += dot;
        }
      }
      mlp_block_backward({.rows = ne, .hidden = h, .ffn = ffn}, xs[e].f32(), w,
                         MlpSavedView{a, u}, dys[e].f32(), tracker_, dxs[e].f32(),
                         tsp_expert_shard_grads(delta, e, ffn, h));
    }
    ring.end_step();
  }
  const float* acc = ring.finish();  // this rank's shards of every expert, every token's part
  for (ExpertTensors& e : G.experts)
    for (Tensor* t : {&e.w_gate, &e.w_up, &e.w_down}) {
      add_floats(t->f32(), acc, t->numel());
      acc += t->numel();
    }
  for (std::int64_t e = 0; e < E; ++e)
    for (std::int64_t i = 0; i < r.offset[e + 1] - r.offset[e]; ++i)
      add_floats(float_at(dn, (r.slot[r.offset[e] + i] / k) * h), float_at(dxs[e].f32(), i * h),
                 h);
  moe_router_backward_rows(l, r, s.router_logits.f32(), dweight, n, dn);
  s = MlpSaved();
}

}  // namespace origami::parallel
