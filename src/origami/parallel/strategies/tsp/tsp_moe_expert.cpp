// TSP mixture-of-experts MLP, expert schedule (docs/moe.md "The expert schedule"): rank r of
// the tsp axis owns experts [r·E/D, (r+1)·E/D) whole (own_whole_experts); the router is
// replicated as in the ring, so every rank routes its own R rows. The tokens' rows go to
// their experts' owners and come back (all-to-all-v on the axis); the weights never move.
//
//   forward, per layer (a_p: this rank's kept assignments to owner p's experts, b_s: source
//   s's assignments to this rank's experts; both include the rank itself, which moves nothing)
//     counts      E/D int64 to each rank (a_p split per local expert of p)  all_to_all
//     rows n      [a_p, h] to owner p, grouped by expert (packed order)    all_to_all
//     owner       each local expert's rows from every source as one GEMM (expert-major)
//     outputs     [b_s, h] back to source s in the order received          all_to_all
//     source      y[token] += weight * output, expert by expert (the single device's order)
//   backward (the conjugates)
//     [dy | w]    [a_p, h+1] to owner p: the output's gradient and the routing weight
//     owner       d routing weight = dy · output (output recomputed from the saved a, u: the
//                 owner is where dy and the output meet), then the SwiGLU backward of w·dy:
//                 the expert's weight gradient (every token's part: summed over dp only) and dx
//     [dx | dw]   [b_s, h+1] back to source s; the source adds dx to its rows, and runs the
//                 router's backward on its rows (moe_router_backward, as the ring)
//   recompute mlp: the backward sends the rows once more (the forward's counts are kept);
//   full: the layer's forward re-runs. Bytes: schedule.h (tsp_moe_expert_*_bytes).
//
// Saved on the owner: the received rows [Σ b_s, h] and their gate/up pre-activations
// [Σ b_s, f] each; on the source: its router logits [R, E]. The balance over the job's
// micro-batch is the ring's (MoeJobBalance, moe_balance.h).
#include <algorithm>
#include <string>

#include "origami/core/float_ops.h"
#include "origami/kernels/gemm.h"
#include "origami/kernels/swiglu.h"
#include "origami/model/moe.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"

namespace origami::parallel {

namespace {

MlpWeights expert_weights(const ExpertTensors& e) {
  return {e.w_gate.f32(), e.w_up.f32(), e.w_down.f32()};
}
MlpGrads expert_grads(ExpertTensors& e) { return {e.w_gate.f32(), e.w_up.f32(), e.w_down.f32()}; }

// The owner's two orders of what it received: source-major, as the all-to-all delivers it,
// and expert-major, each local expert's rows from every source together (sources in rank
// order), so that an expert runs as one GEMM.
struct OwnerOrder {
  std::vector<std::int64_t> expert_begin;  // [E/D + 1] expert-major offsets
  std::vector<std::int64_t> at;            // expert-major position of source-major row i
  std::int64_t total() const { return expert_begin.back(); }
};
OwnerOrder owner_order(const std::vector<std::int64_t>& received, int D, std::int64_t local) {
  OwnerOrder o;
  o.expert_begin.assign(static_cast<std::size_t>(local + 1), 0);
  for (int s = 0; s < D; ++s)
    for (std::int64_t j = 0; j < local; ++j)
      o.expert_begin[j + 1] += received[s * local + j];
  for (std::int64_t j = 0; j < local; ++j) o.expert_begin[j + 1] += o.expert_begin[j];
  std::vector<std::int64_t> fill(o.expert_begin.begin(), o.expert_begin.end() - 1);
  for (int s = 0; s < D; ++s)
    for (std::int64_t j = 0; j < local; ++j)
      for (std::int64_t i = 0; i < received[s * local + j]; ++i) o.at.push_back(fill[j]++);
  return o;
}

// Rows of `width` floats, one per kept assignment in packed order: the routed token's row
// of `rows` (`extra`, when given, fills the last column: the routing weight).
Tensor packed_rows(const MoeDims& d, const MoeRouting& r, const float* rows, std::int64_t width,
                   const std::vector<float>* extra, MemoryTracker& tracker) {
  const std::int64_t kept = r.offset[static_cast<std::size_t>(d.experts)], h = d.hidden;
  Tensor out(tracker, MemCategory::CommBuffers, {std::max<std::int64_t>(kept, 1), width});
  for (std::int64_t i = 0; i < kept; ++i) {
    const std::int64_t slot = r.slot[static_cast<std::size_t>(i)];
    copy_floats(float_at(out.f32(), i * width), float_at(rows, (slot / d.top_k) * h), h);
    if (extra != nullptr) out.f32()[i * width + h] = (*extra)[static_cast<std::size_t>(slot)];
  }
  return out;
}

}  // namespace

std::int64_t TspOps::MoeExchange::to(int owner) const {
  std::int64_t n = 0;
  for (std::int64_t j = 0; j < local; ++j) n += sent[static_cast<std::size_t>(owner * local + j)];
  return n;
}
std::int64_t TspOps::MoeExchange::from(int source) const {
  std::int64_t n = 0;
  for (std::int64_t j = 0; j < local; ++j)
    n += received[static_cast<std::size_t>(source * local + j)];
  return n;
}
std::vector<std::int64_t> TspOps::MoeExchange::to_counts(std::int64_t width) const {
  std::vector<std::int64_t> out(received.size() / static_cast<std::size_t>(local));
  for (std::size_t p = 0; p < out.size(); ++p) out[p] = to(static_cast<int>(p)) * width;
  return out;
}
std::vector<std::int64_t> TspOps::MoeExchange::from_counts(std::int64_t width) const {
  std::vector<std::int64_t> out(received.size() / static_cast<std::size_t>(local));
  for (std::size_t p = 0; p < out.size(); ++p) out[p] = from(static_cast<int>(p)) * width;
  return out;
}
std::int64_t TspOps::MoeExchange::kept() const {
  std::int64_t n = 0;
  for (std::int64_t c : sent) n += c;
  return n;
}
TspExpertRows TspOps::MoeExchange::rows(int self) const {
  TspExpertRows r;
  const auto D = static_cast<int>(received.size() / static_cast<std::size_t>(local));
  for (int p = 0; p < D; ++p)
    if (p != self) {
      r.sent += to(p);
      r.received += from(p);
    }
  return r;
}

void own_whole_experts(const ModelConfig& config, int D, int rank, std::vector<ShardSpec>& specs) {
  const std::string marker = ".block_sparse_moe.experts.";
  for (ShardSpec& s : specs) {
    const std::size_t at = s.name.find(marker);
    if (at == std::string::npos) continue;
    const std::int64_t e = std::stoll(s.name.substr(at + marker.size()));
    s.owner = tsp_expert_owner(config.num_local_experts, D, e);
    s.shard_dim = -1;
    s.parts = 1;
    s.offset = Shape(s.global.size(), 0);
    s.local = s.owner == rank ? s.global : Shape{0};
  }
}

void TspOps::moe_exchange_counts(std::int64_t l, const MoeRouting& r) {
  const MoeDims d = moe_dims();
  MoeExchange& ex = (*moe_exchange_)[static_cast<std::size_t>(l)];
  ex.local = d.experts / size_;
  ex.sent.assign(static_cast<std::size_t>(d.experts), 0);
  for (std::int64_t e = 0; e < d.experts; ++e) ex.sent[e] = r.offset[e + 1] - r.offset[e];
  ex.received.assign(ex.sent.size(), 0);
  const std::vector<std::int64_t> per(static_cast<std::size_t>(size_), ex.local);
  axis_.all_to_all(ex.sent, per, ex.received, per);
}

Tensor TspOps::moe_to_owners(const MoeExchange& ex, const float* packed, std::int64_t width,
                             MemCategory category) {
  const OwnerOrder o = owner_order(ex.received, size_, ex.local);
  const std::vector<std::int64_t> send = ex.to_counts(width);
  Tensor got(tracker_, MemCategory::CommBuffers, {std::max<std::int64_t>(o.total(), 1), width});
  axis_.all_to_all(comm::ConstBuffer(packed, ex.kept() * width, DType::F32), send,
                   comm::Buffer(got.f32(), o.total() * width, DType::F32), ex.from_counts(width));
  Tensor out(tracker_, category, {o.total(), width});
  for (std::int64_t i = 0; i < o.total(); ++i)
    copy_floats(float_at(out.f32(), o.at[static_cast<std::size_t>(i)] * width),
                float_at(got.f32(), i * width), width);
  return out;
}

Tensor TspOps::moe_from_owners(const MoeExchange& ex, const float* expert_major,
                               std::int64_t width) {
  const OwnerOrder o = owner_order(ex.received, size_, ex.local);
  Tensor back(tracker_, MemCategory::CommBuffers, {std::max<std::int64_t>(o.total(), 1), width});
  for (std::int64_t i = 0; i < o.total(); ++i)
    copy_floats(float_at(back.f32(), i * width),
                float_at(expert_major, o.at[static_cast<std::size_t>(i)] * width), width);
  Tensor out(tracker_, MemCategory::CommBuffers, {std::max<std::int64_t>(ex.kept(), 1), width});
  axis_.all_to_all(comm::ConstBuffer(back.f32(), o.total() * width, DType::F32),
                   ex.from_counts(width), comm::Buffer(out.f32(), ex.kept() * width, DType::F32),
                   ex.to_counts(width));
  return out;
}

void TspOps::moe_expert_forward(std::int64_t l, const float* n, MlpSaved& s, float* x) {
  const MoeDims d = moe_dims();
  const std::int64_t R = d.rows, h = d.hidden, f = d.ffn, E = d.experts, k = d.top_k;
  const LayerTensors& L = params_.layers[static_cast<std::size_t>(l)];
  s.router_logits = Tensor(tracker_, MemCategory::Activations, {R, E});
  kernels::linear_forward(R, h, E, n, L.router.f32(), s.router_logits.f32());
  const MoeRouting r = route_tokens(d, s.router_logits.f32());
  moe_job_.record(l, groups_, d, r, s.router_logits.f32());
  moe_exchange_counts(l, r);
  const MoeExchange& ex = (*moe_exchange_)[static_cast<std::size_t>(l)];
  {
    const Tensor rows = packed_rows(d, r, n, h, nullptr, tracker_);
    s.expert_inputs = moe_to_owners(ex, rows.f32(), h, MemCategory::Activations);
  }
  const OwnerOrder o = owner_order(ex.received, size_, ex.local);
  s.a = Tensor(tracker_, MemCategory::Activations, {o.total(), f});
  s.u = Tensor(tracker_, MemCategory::Activations, {o.total(), f});
  Tensor y(tracker_, MemCategory::Workspace, {o.total(), h});
  for (std::int64_t j = 0; j < ex.local; ++j) {  // each local expert: one GEMM of its rows
    const std::int64_t begin = o.expert_begin[j], ne = o.expert_begin[j + 1] - begin;
    if (ne == 0) continue;
    const ExpertTensors& w = L.experts[static_cast<std::size_t>(rank_ * ex.local + j)];
    mlp_block_forward({.rows = ne, .hidden = h, .ffn = f},
                      float_at(s.expert_inputs.f32(), begin * h), expert_weights(w), tracker_,
                      MlpSlot{float_at(s.a.f32(), begin * f), float_at(s.u.f32(), begin * f)},
                      float_at(y.f32(), begin * h));
  }
  const Tensor out = moe_from_owners(ex, y.f32(), h);
  const std::int64_t kept = r.offset[static_cast<std::size_t>(E)];
  for (std::int64_t i = 0; i < kept; ++i) {  // packed order: expert by expert, as one device
    const std::int64_t slot = r.slot[static_cast<std::size_t>(i)];
    const float weight = r.weight[static_cast<std::size_t>(slot)];
    float* row = float_at(x, (slot / k) * h);
    const float* in = float_at(out.f32(), i * h);
    for (std::int64_t c = 0; c < h; ++c) row[c] += weight * in[c];
  }
}

void TspOps::moe_expert_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dy,
                                 float* dn) {
  const MoeDims d = moe_dims();
  const std::int64_t R = d.rows, h = d.hidden, f = d.ffn, E = d.experts, k = d.top_k;
  const LayerTensors& L = params_.layers[static_cast<std::size_t>(l)];
  LayerTensors& G = grads_.layers[static_cast<std::size_t>(l)];
  const bool saved = s.a.defined();
  const MoeRouting r = moe_backward_routing(l, n, s);
  const MoeExchange& ex = (*moe_exchange_)[static_cast<std::size_t>(l)];
  const OwnerOrder o = owner_order(ex.received, size_, ex.local);
  if (!saved) {  // the rows to the owners once more, their gate/up recomputed there
    const Tensor rows = packed_rows(d, r, n, h, nullptr, tracker_);
    s.expert_inputs = moe_to_owners(ex, rows.f32(), h, MemCategory::Workspace);
    s.a = Tensor(tracker_, MemCategory::Workspace, {o.total(), f});
    s.u = Tensor(tracker_, MemCategory::Workspace, {o.total(), f});
    for (std::int64_t j = 0; j < ex.local; ++j) {
      const std::int64_t begin = o.expert_begin[j], ne = o.expert_begin[j + 1] - begin;
      if (ne == 0) continue;
      const MlpWeights w = expert_weights(L.experts[static_cast<std::size_t>(rank_ * ex.local + j)]);
      const float* xin = float_at(s.expert_inputs.f32(), begin * h);
      kernels::linear_forward(ne, h, f, xin, w.w_gate, float_at(s.a.f32(), begin * f));
      kernels::linear_forward(ne, h, f, xin, w.w_up, float_at(s.u.f32(), begin * f));
    }
  }
  // [dy | routing weight] of every kept assignment, to its expert's owner.
  const std::int64_t wide = h + 1;
  Tensor got;
  {
    const Tensor rows = packed_rows(d, r, dy, wide, &r.weight, tracker_);
    got = moe_to_owners(ex, rows.f32(), wide, MemCategory::Workspace);
  }
  Tensor back(tracker_, MemCategory::Workspace, {o.total(), wide});  // [dx | d routing weight]
  for (std::int64_t j = 0; j < ex.local; ++j) {
    const std::int64_t begin = o.expert_begin[j], ne = o.expert_begin[j + 1] - begin;
    if (ne == 0) continue;
    ExpertTensors& g = G.experts[static_cast<std::size_t>(rank_ * ex.local + j)];
    const MlpWeights w = expert_weights(L.experts[static_cast<std::size_t>(rank_ * ex.local + j)]);
    const float* a = float_at(s.a.f32(), begin * f);
    const float* u = float_at(s.u.f32(), begin * f);
    Tensor dye(tracker_, MemCategory::Workspace, {ne, h});
    {  // the expert's output again, for d routing weight = dy . output
      Tensor gated(tracker_, MemCategory::Workspace, {ne, f});
      kernels::swiglu_forward(ne * f, a, u, gated.f32());
      Tensor ye(tracker_, MemCategory::Workspace, {ne, h});
      kernels::linear_forward(ne, f, h, gated.f32(), w.w_down, ye.f32());
      for (std::int64_t i = 0; i < ne; ++i) {
        const float* in = float_at(got.f32(), (begin + i) * wide);
        const float* out = float_at(ye.f32(), i * h);
        float* dst = float_at(dye.f32(), i * h);
        double dot = 0;
        for (std::int64_t c = 0; c < h; ++c) {
          dot += static_cast<double>(in[c]) * out[c];
          dst[c] = in[h] * in[c];
        }
        back.f32()[(begin + i) * wide + h] = static_cast<float>(dot);
      }
    }
    Tensor dx(tracker_, MemCategory::Workspace, {ne, h});
    mlp_block_backward({.rows = ne, .hidden = h, .ffn = f},
                       float_at(s.expert_inputs.f32(), begin * h), w, MlpSavedView{a, u},
                       dye.f32(), tracker_, dx.f32(), expert_grads(g));
    for (std::int64_t i = 0; i < ne; ++i)
      copy_floats(float_at(back.f32(), (begin + i) * wide), float_at(dx.f32(), i * h), h);
  }
  got = Tensor();
  const Tensor ret = moe_from_owners(ex, back.f32(), wide);
  back = Tensor();
  std::vector<double> dweight(static_cast<std::size_t>(R * k), 0.0);
  const std::int64_t kept = r.offset[static_cast<std::size_t>(E)];
  for (std::int64_t i = 0; i < kept; ++i) {  // packed order, as the single device adds them
    const std::int64_t slot = r.slot[static_cast<std::size_t>(i)];
    add_floats(float_at(dn, (slot / k) * h), float_at(ret.f32(), i * wide), h);
    dweight[static_cast<std::size_t>(slot)] = ret.f32()[i * wide + h];
  }
  moe_router_backward_rows(l, r, s.router_logits.f32(), dweight, n, dn);
  s = MlpSaved();
}

}  // namespace origami::parallel
