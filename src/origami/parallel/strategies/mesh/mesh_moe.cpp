// The baselines' mixture-of-experts MLP (docs/moe.md, "The mesh strategies"): the single
// device's blocks (moe.h: routing, top-k and its tie-break, the SwiGLU experts, the router's
// backward) run on the block's R rows, reached and left exactly as the dense MLP's
// (identity / all-gather over tp on entry, the partial output all-reduced / reduce-scattered
// over tp on exit). Each expert is sharded over tp as the dense MLP (rows F_t of w1/w3, columns
// F_t of w2: make_shard_specs), so a tp rank's expert output is its partial sum, and the
// weighted sum over the chosen experts stays linear in those partials. The router is
// replicated: every tp rank routes the same rows alike (the stream is bitwise equal over tp),
// so neither the routing nor the collectives depend on the rank. The balance is the job's
// (MoeJobBalance: over sp, then dp).
#include "origami/model/moe.h"
#include "origami/parallel/strategies/mesh/mesh_ops.h"

namespace origami::parallel {

MoeDims MeshOps::moe_dims() const {
  return {.rows = rows(),
          .hidden = config_.hidden_size,
          .ffn = config_.intermediate_size / tp_size_,
          .experts = config_.num_local_experts,
          .top_k = config_.num_experts_per_tok,
          // Only where a rank routes the job's whole micro-batch (validate_plan).
          .capacity_factor = config_.moe_capacity_factor};
}

void MeshOps::moe_forward(std::int64_t l, const float* n, MlpSaved& s, float* x) {
  Tensor in_holder, out_holder;
  const float* in = gather_rows(n, in_holder);
  float* y = partial_target(out_holder, x);
  const MoeDims d = moe_dims();
  const MoeRouting r = moe_block_forward(
      d, in, moe_weights(params_.layers[static_cast<std::size_t>(l)]), tracker_, s, y, nullptr);
  moe_job_.record(l, groups_, d, r, s.router_logits.f32());
  in_holder = Tensor();
  reduce_rows_into(out_holder, x);
}

void MeshOps::moe_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dx,
                           float* dn) {
  const MoeWeights w = moe_weights(params_.layers[static_cast<std::size_t>(l)]);
  const MoeGrads g = moe_grads(grads_.layers[static_cast<std::size_t>(l)]);
  const MoeDims d = moe_dims();
  Tensor dy_holder, in_holder, dn_holder;
  const float* dy = gather_rows(dx, dy_holder);
  const float* in = gather_rows(n, in_holder);
  if (!s.router_logits.defined()) moe_block_recompute(d, in, w, tracker_, s);  // recompute policy
  const MoeRouting r = route_tokens(d, s.router_logits.f32());
  float* dnp = partial_target(dn_holder, dn);
  std::vector<double> dweight = moe_experts_backward(d, in, w, s, r, dy, tracker_, dnp, g.experts);
  // d loss / d routing weight = dy . (the expert's output), and that output is the sum of the
  // tp ranks' partials: summed over tp (R x k doubles), so that every rank's router backward
  // sees the whole and computes the same router gradient.
  if (tp_size_ > 1) groups_.tp().all_reduce(dweight, dweight);
  // The router's part of dn is then the same on every tp rank: rank 0 adds it into the
  // partial, so that the exit's sum over tp counts it once.
  moe_router_backward(d, r, s.router_logits.f32(), dweight, moe_job_.probability_grad(l), in,
                      w.router, tracker_, tp_rank_ == 0 ? dnp : nullptr, g.router);
  s = MlpSaved();
  reduce_rows_into(dn_holder, dn);
}

}  // namespace origami::parallel
