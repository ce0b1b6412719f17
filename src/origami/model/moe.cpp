#include "origami/model/moe.h"

#include <algorithm>
#include <cmath>

#include "origami/core/error.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/swiglu.h"

namespace origami {

namespace {

// p[E] = softmax(logits[E]) in double (the router's probabilities, for the balance term and
// the backward; the forward's routing weights come from the chosen logits alone).
void moe_router_probabilities(std::int64_t experts, const float* logits, double* p) {
  double max = logits[0];
  for (std::int64_t e = 1; e < experts; ++e) max = std::max(max, static_cast<double>(logits[e]));
  double sum = 0;
  for (std::int64_t e = 0; e < experts; ++e) sum += p[e] = std::exp(logits[e] - max);
  for (std::int64_t e = 0; e < experts; ++e) p[e] /= sum;
}

// The router's logits [rows, E] into `logits` and each kept assignment's gate/up
// pre-activations into a and u [kept, ffn]; returns the routing.
MoeRouting moe_route_and_project(const MoeDims& d, const float* n, const MoeWeights& w,
                                 MemoryTracker& tracker, MemCategory category, MlpSaved& s) {
  s.router_logits = Tensor(tracker, category, {d.rows, d.experts});
  kernels::linear_forward(d.rows, d.hidden, d.experts, n, w.router, s.router_logits.f32());
  MoeRouting r = route_tokens(d, s.router_logits.f32());
  const std::int64_t kept = r.offset[static_cast<std::size_t>(d.experts)];
  s.a = Tensor(tracker, category, {kept, d.ffn});
  s.u = Tensor(tracker, category, {kept, d.ffn});
  return r;
}

}  // namespace

MoeWeights moe_weights(const LayerTensors& L) {
  MoeWeights w{L.router.f32(), {}};
  for (const ExpertTensors& e : L.experts)
    w.experts.push_back({e.w_gate.f32(), e.w_up.f32(), e.w_down.f32()});
  return w;
}
MoeGrads moe_grads(LayerTensors& G) {
  MoeGrads g{G.router.f32(), {}};
  for (ExpertTensors& e : G.experts)
    g.experts.push_back({e.w_gate.f32(), e.w_up.f32(), e.w_down.f32()});
  return g;
}

void MoeLoad::add(const std::vector<std::int64_t>& tokens, std::int64_t dropped_assignments) {
  if (tokens_per_expert.empty()) tokens_per_expert.assign(tokens.size(), 0);
  ORIGAMI_CHECK(tokens.size() == tokens_per_expert.size(),
                "expert load of {} experts added to one of {}", tokens.size(),
                tokens_per_expert.size());
  for (std::size_t e = 0; e < tokens.size(); ++e) tokens_per_expert[e] += tokens[e];
  dropped += dropped_assignments;
}

double MoeLoad::imbalance() const {
  std::int64_t total = 0, most = 0;
  for (const std::int64_t t : tokens_per_expert) {
    total += t;
    most = std::max(most, t);
  }
  if (total == 0) return 0.0;
  return static_cast<double>(most) * static_cast<double>(tokens_per_expert.size()) /
         static_cast<double>(total);
}

Tensor moe_gather_rows(const MoeDims& d, const MoeRouting& r, std::int64_t e, const float* n,
                       MemoryTracker& tracker) {
  const std::int64_t begin = r.offset[e], ne = r.offset[e + 1] - begin, h = d.hidden;
  Tensor x(tracker, MemCategory::Workspace, {ne, h});
  float* out = x.f32();
  for (std::int64_t i = 0; i < ne; ++i) {
    const float* row = n + (r.slot[begin + i] / d.top_k) * h;
    std::copy(row, row + h, out + i * h);
  }
  return x;
}

std::vector<double> moe_probability_sums(const MoeDims& d, const float* logits) {
  std::vector<double> p(static_cast<std::size_t>(d.experts)), sums(p.size(), 0.0);
  for (std::int64_t t = 0; t < d.rows; ++t) {
    moe_router_probabilities(d.experts, logits + t * d.experts, p.data());
    for (std::size_t e = 0; e < p.size(); ++e) sums[e] += p[e];
  }
  return sums;
}

double moe_balance(const std::vector<std::int64_t>& chosen,
                   const std::vector<double>& probability_sums, std::int64_t rows) {
  const double T = static_cast<double>(rows);
  double balance = 0;
  for (std::size_t e = 0; e < chosen.size(); ++e)
    balance += static_cast<double>(chosen[e]) / T * (probability_sums[e] / T);
  return static_cast<double>(chosen.size()) * balance;
}

std::vector<double> moe_balance_probability_grad(const std::vector<std::int64_t>& chosen,
                                                 std::int64_t rows, double balance_grad) {
  const double T = static_cast<double>(rows), E = static_cast<double>(chosen.size());
  std::vector<double> g(chosen.size());
  for (std::size_t e = 0; e < chosen.size(); ++e)
    g[e] = balance_grad * E * static_cast<double>(chosen[e]) / (T * T);
  return g;
}

void moe_router_backward(const MoeDims& d, const MoeRouting& r, const float* logits,
                         const std::vector<double>& dweight,
                         const std::vector<double>& probability_grad, const float* n,
                         const float* router, MemoryTracker& tracker, float* dn,
                         float* grad_router) {
  // Through the renormalisation (w_j = p_j / S, S = sum of the chosen p), the balance term
  // and the softmax, to the router's logits.
  const std::int64_t k = d.top_k, E = d.experts, T = d.rows;
  Tensor dlogits(tracker, MemCategory::Workspace, {T, E});
  std::vector<double> p(static_cast<std::size_t>(E)), dp(p.size());
  for (std::int64_t t = 0; t < T; ++t) {
    moe_router_probabilities(E, logits + t * E, p.data());
    for (std::int64_t e = 0; e < E; ++e) dp[e] = probability_grad[e];
    double sum = 0, weighted = 0;
    for (std::int64_t j = 0; j < k; ++j) {
      sum += p[r.expert[t * k + j]];
      weighted += dweight[t * k + j] * p[r.expert[t * k + j]];
    }
    for (std::int64_t j = 0; j < k; ++j)
      dp[r.expert[t * k + j]] += dweight[t * k + j] / sum - weighted / (sum * sum);
    double dot = 0;
    for (std::int64_t e = 0; e < E; ++e) dot += p[e] * dp[e];
    for (std::int64_t e = 0; e < E; ++e)
      dlogits.f32()[t * E + e] = static_cast<float>(p[e] * (dp[e] - dot));
  }
  kernels::linear_backward_weight(T, d.hidden, E, dlogits.f32(), n, grad_router);
  if (dn != nullptr) kernels::linear_backward_input(T, d.hidden, E, dlogits.f32(), router, dn);
}

MoeRouting route_tokens(const MoeDims& d, const float* logits) {
  const std::int64_t T = d.rows, E = d.experts, k = d.top_k;
  MoeRouting r;
  r.expert.resize(static_cast<std::size_t>(T * k));
  r.weight.resize(static_cast<std::size_t>(T * k));
  r.kept.assign(static_cast<std::size_t>(T * k), 1);
  r.chosen.assign(static_cast<std::size_t>(E), 0);
  std::vector<std::uint8_t> taken(static_cast<std::size_t>(E));
  for (std::int64_t t = 0; t < T; ++t) {
    const float* l = logits + t * E;
    std::fill(taken.begin(), taken.end(), 0);
    for (std::int64_t j = 0; j < k; ++j) {
      std::int64_t best = -1;
      for (std::int64_t e = 0; e < E; ++e)  // strictly larger: a tie keeps the lower index
        if (!taken[e] && (best < 0 || l[e] > l[best])) best = e;
      taken[best] = 1;
      r.expert[t * k + j] = static_cast<std::int32_t>(best);
    }
    // Renormalised over the chosen: p_j / sum p_chosen = softmax over the chosen logits.
    const double max = l[r.expert[t * k]];
    double sum = 0;
    for (std::int64_t j = 0; j < k; ++j) sum += std::exp(l[r.expert[t * k + j]] - max);
    for (std::int64_t j = 0; j < k; ++j)
      r.weight[t * k + j] = static_cast<float>(std::exp(l[r.expert[t * k + j]] - max) / sum);
  }
  r.capacity = d.capacity_factor > 0
                   ? static_cast<std::int64_t>(std::ceil(d.capacity_factor *
                                                         static_cast<double>(T * k) /
                                                         static_cast<double>(E)))
                   : 0;
  std::vector<std::int64_t> count(static_cast<std::size_t>(E), 0);
  for (std::int64_t j = 0; j < k; ++j)  // priority: every first choice, then every second ...
    for (std::int64_t t = 0; t < T; ++t) {
      const std::int32_t e = r.expert[t * k + j];
      ++r.chosen[e];
      if (r.capacity > 0 && count[e] >= r.capacity) {
        r.kept[t * k + j] = 0;
        ++r.dropped;
      } else {
        ++count[e];
      }
    }
  r.offset.assign(static_cast<std::size_t>(E + 1), 0);
  for (std::int64_t e = 0; e < E; ++e) r.offset[e + 1] = r.offset[e] + count[e];
  r.slot.resize(static_cast<std::size_t>(r.offset[E]));
  std::vector<std::int64_t> fill(r.offset.begin(), r.offset.end() - 1);
  for (std::int64_t j = 0; j < k; ++j)
    for (std::int64_t t = 0; t < T; ++t)
      if (r.kept[t * k + j]) r.slot[fill[r.expert[t * k + j]]++] = t * k + j;
  return r;
}

MoeRouting moe_block_forward(const MoeDims& d, const float* n, const MoeWeights& w,
                             MemoryTracker& tracker, MlpSaved& s, float* y, MoeStats* stats) {
  MoeRouting r = moe_route_and_project(d, n, w, tracker, MemCategory::Activations, s);
  const std::int64_t h = d.hidden, f = d.ffn;
  for (std::int64_t e = 0; e < d.experts; ++e) {
    const std::int64_t begin = r.offset[e], ne = r.offset[e + 1] - begin;
    if (ne == 0) continue;
    Tensor x = moe_gather_rows(d, r, e, n, tracker);
    Tensor ye(tracker, MemCategory::Workspace, {ne, h});
    mlp_block_forward({.rows = ne, .hidden = h, .ffn = f}, x.f32(), w.experts[e], tracker,
                      MlpSlot{s.a.f32() + begin * f, s.u.f32() + begin * f}, ye.f32());
    for (std::int64_t i = 0; i < ne; ++i) {
      const std::int64_t slot = r.slot[begin + i];
      const float weight = r.weight[slot];
      float* out = y + (slot / d.top_k) * h;
      const float* in = ye.f32() + i * h;
      for (std::int64_t c = 0; c < h; ++c) out[c] += weight * in[c];
    }
  }
  if (stats == nullptr) return r;
  stats->balance = moe_balance(r.chosen, moe_probability_sums(d, s.router_logits.f32()), d.rows);
  stats->tokens_per_expert.resize(static_cast<std::size_t>(d.experts));
  for (std::int64_t e = 0; e < d.experts; ++e)
    stats->tokens_per_expert[e] = r.offset[e + 1] - r.offset[e];
  stats->dropped = r.dropped;
  return r;
}

void moe_block_recompute(const MoeDims& d, const float* n, const MoeWeights& w,
                         MemoryTracker& tracker, MlpSaved& s) {
  const MoeRouting r = moe_route_and_project(d, n, w, tracker, MemCategory::Workspace, s);
  const std::int64_t h = d.hidden, f = d.ffn;
  for (std::int64_t e = 0; e < d.experts; ++e) {
    const std::int64_t begin = r.offset[e], ne = r.offset[e + 1] - begin;
    if (ne == 0) continue;
    Tensor x = moe_gather_rows(d, r, e, n, tracker);
    kernels::linear_forward(ne, h, f, x.f32(), w.experts[e].w_gate, s.a.f32() + begin * f);
    kernels::linear_forward(ne, h, f, x.f32(), w.experts[e].w_up, s.u.f32() + begin * f);
  }
}

std::vector<double> moe_experts_backward(const MoeDims& d, const float* n, const MoeWeights& w,
                                         const MlpSaved& s, const MoeRouting& r, const float* dy,
                                         MemoryTracker& tracker, float* dn,
                                         const std::vector<MlpGrads>& g) {
  const std::int64_t h = d.hidden, f = d.ffn, k = d.top_k, E = d.experts, T = d.rows;
  std::vector<double> dweight(static_cast<std::size_t>(T * k), 0.0);
  for (std::int64_t e = 0; e < E; ++e) {
    const std::int64_t begin = r.offset[e], ne = r.offset[e + 1] - begin;
    if (ne == 0) continue;
    const float* a = s.a.f32() + begin * f;
    const float* u = s.u.f32() + begin * f;
    Tensor x = moe_gather_rows(d, r, e, n, tracker);
    Tensor ye(tracker, MemCategory::Workspace, {ne, h});
    {  // the expert's output, recomputed from the saved pre-activations
      Tensor gated(tracker, MemCategory::Workspace, {ne, f});
      kernels::swiglu_forward(ne * f, a, u, gated.f32());
      kernels::linear_forward(ne, f, h, gated.f32(), w.experts[e].w_down, ye.f32());
    }
    Tensor dye(tracker, MemCategory::Workspace, {ne, h});
    for (std::int64_t i = 0; i < ne; ++i) {
      const std::int64_t slot = r.slot[begin + i];
      const float* grad = dy + (slot / k) * h;
      const float* out = ye.f32() + i * h;
      float* dst = dye.f32() + i * h;
      double dot = 0;
      for (std::int64_t c = 0; c < h; ++c) {
        dot += static_cast<double>(grad[c]) * out[c];
        dst[c] = r.weight[slot] * grad[c];
      }
      dweight[slot] = dot;
    }
    ye = Tensor();
    Tensor dx(tracker, MemCategory::Workspace, {ne, h});
    mlp_block_backward({.rows = ne, .hidden = h, .ffn = f}, x.f32(), w.experts[e],
                       MlpSavedView{a, u}, dye.f32(), tracker, dx.f32(), g[e]);
    for (std::int64_t i = 0; i < ne; ++i) {
      float* dst = dn + (r.slot[begin + i] / k) * h;
      const float* src = dx.f32() + i * h;
      for (std::int64_t c = 0; c < h; ++c) dst[c] += src[c];
    }
  }
  return dweight;
}

void moe_block_backward(const MoeDims& d, const float* n, const MoeWeights& w, const MlpSaved& s,
                        const float* dy, double balance_grad, MemoryTracker& tracker, float* dn,
                        const MoeGrads& g) {
  const MoeRouting r = route_tokens(d, s.router_logits.f32());
  const std::vector<double> dweight =
      moe_experts_backward(d, n, w, s, r, dy, tracker, dn, g.experts);
  moe_router_backward(d, r, s.router_logits.f32(), dweight,
                      moe_balance_probability_grad(r.chosen, d.rows, balance_grad), n, w.router,
                      tracker, dn, g.router);
}

}  // namespace origami
