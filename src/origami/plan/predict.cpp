#include "origami/plan/predict.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "origami/core/error.h"
#include "origami/parallel/pipeline_boundary.h"
#include "origami/parallel/pipeline_stages.h"
#include "origami/parallel/strategies/tsp_allgather/schedule.h"
#include "origami/plan/document_imbalance.h"
#include "origami/plan/shapes.h"

namespace origami::plan {

std::string link_class_name(LinkClass c) {
  switch (c) {
    case LinkClass::Intra:
      return "intra";
    case LinkClass::Inter:
      return "inter";
    case LinkClass::Mixed:
      return "mixed";
  }
  return "?";
}

LinkClass link_class(const Layout& l, const std::string& axis, int devices_per_node) {
  // Innermost first: tp, tsp, sp, dp, pp (the most talkative axis innermost; pp outermost).
  const std::vector<std::pair<std::string, int>> order{
      {"tp", l.tp}, {"tsp", l.tsp}, {"sp", l.sp}, {"dp", l.dp}, {"pp", l.pp}};
  const std::string name = axis == "tsp_shards" || axis == "tsp_grads" ? "tsp" : axis;
  std::int64_t stride = 1;
  int size = 1;
  for (const auto& [a, n] : order) {
    if (a == name) {
      size = n;
      break;
    }
    stride *= n;
  }
  const std::int64_t span = stride * size, node = std::max(1, devices_per_node);
  if (size <= 1 || (span <= node && node % span == 0)) return LinkClass::Intra;
  if (stride % node == 0) return LinkClass::Inter;
  return LinkClass::Mixed;
}

double executed_training_flops(const ModelConfig& m, std::int64_t batch, std::int64_t seq,
                               Recompute r) {
  const double h = double(m.hidden_size), d = double(m.head_dim());
  const double H = double(m.num_attention_heads), Hkv = double(m.num_key_value_heads);
  const double f = double(m.intermediate_size), L = double(m.num_hidden_layers);
  const double T = double(batch) * double(seq), S = double(seq);
  const double attention_params = 2 * h * H * d + 2 * h * Hkv * d;
  const double attention_core = 4 * d * H * double(batch) * S * (S + 1) / 2;  // forward
  double extra = 0;
  if (r == Recompute::Mlp) extra = L * 2 * (2 * h * f) * T;  // gate and up again
  if (r == Recompute::Full) extra = L * (2 * (attention_params + 3 * h * f) * T + attention_core);
  return training_flops(m, batch, seq) + extra;
}

std::vector<std::pair<std::string, std::int64_t>> Prediction::categories() const {
  return {{"parameters", memory.parameters},
          {"gradients", memory.gradients},
          {"optimizer state", memory.optimizer},
          {"saved activations", memory.activations},
          {"communication buffers", memory.comm_buffers},
          {"workspace", memory.workspace},
          {"logits", memory.logits}};
}

namespace {

int axis_size(const Layout& l, const std::string& axis) {
  if (axis == "tp") return l.tp;
  if (axis == "sp") return l.sp;
  if (axis == "dp") return l.dp;
  if (axis == "pp") return l.pp;
  return l.tsp;  // tsp, tsp_shards, tsp_grads
}

// The engine's out-of-place reduce-scatter runs its ring once per chunk column of at most
// 1 MiB of each block and waits every step (comm/collectives/reduce_scatter.cpp); its blocks
// are fp32 buffers whatever the profile counts for their messages.
constexpr double kReduceChunkBytes = 1 << 20;
constexpr double kBufferElementBytes = 4;

// Messages one call of `op` sends per rank on an n-rank axis (docs/comm.md's algorithms),
// `per_call` bytes at `elem` bytes per element.
double messages_per_call(const std::string& op, int n, double per_call, double elem) {
  if (op == "all_reduce") return 2.0 * (n - 1);  // in place: a step's chunks posted together
  if (op == "reduce_scatter") {
    const double block = per_call / std::max(1, n - 1) / elem * kBufferElementBytes;
    return (n - 1) * std::max(1.0, std::ceil(block / kReduceChunkBytes));
  }
  if (op == "all_gather" || op == "all_to_all") return n - 1;
  if (op == "send") return 1;
  if (op == "barrier") return std::ceil(std::log2(n));  // dissemination rounds
  return 0;  // recv: the peer's send carries the cost
}

const Link& link_of(const Hardware& hw, LinkClass c) {
  return c == LinkClass::Intra ? hw.intra : hw.inter;  // a mixed ring runs at its slowest hop
}

// Per-layer forward compute per device, split by block (for the overlap rules): the whole
// attention, its core (the causal products) and one h x (H·d) projection's backward (weight
// and input gradients).
struct BlockSeconds {
  double attention_f = 0, attention_b = 0, mlp_f = 0, mlp_b = 0, head_f = 0, head_b = 0;
  double core_f = 0, core_b = 0, projection_b = 0;
};
BlockSeconds block_seconds(const ModelConfig& m, const Layout& l, const Workload& w,
                           double rate) {
  const double h = double(m.hidden_size), d = double(m.head_dim());
  const double H = double(m.num_attention_heads), Hkv = double(m.num_key_value_heads);
  const double f = double(m.intermediate_size), V = double(m.vocab_size);
  const double B = double(w.batch) * double(l.dp);  // the job's micro-batch: every replica's
  const double T = B * double(w.seq), S = double(w.seq);
  const double n = double(l.world()) * rate;
  // With more weight-axis ranks than kv heads, each kv head's projection runs on every replica.
  const double kv_copies = parallel::kv_replicas(m, l.tp * l.tsp);
  const double linear = 2 * (2 * h * H * d + 2 * h * Hkv * kv_copies * d) * T;
  const double core = 4 * d * H * B * S * (S + 1) / 2;
  BlockSeconds b;
  b.attention_f = (linear + core) / n;
  b.attention_b = (2 * linear + 2.5 * core) / n;
  b.core_f = core / n;
  b.core_b = 2.5 * core / n;
  b.projection_b = 2 * 2 * h * H * d * T / n;
  b.mlp_f = 2 * 3 * h * f * T / n;
  b.mlp_b = 2 * b.mlp_f;
  b.head_f = 2 * h * V * T / n;
  b.head_b = 2 * b.head_f;
  return b;
}

// SP and TP+SP (attention_cp.cpp's schedule): a forward's K/V all-gathers (2 calls per
// layer, one after the other on the sp communicator) run behind the local rows' attention,
// 1/Σ of the rank's causal products (zigzag gives each rank's own rows 1/Σ of its visible
// pairs); the backward's re-gather behind the output projection's backward and the local
// rows' attention backward; the dK/dV reduce-scatters behind the query projection's
// backward. Everything else (TP's collectives, the gradient all-reduces) is waited at once.
void cp_exposure(const Shapes& s, const Workload& w, const BlockSeconds& c,
                 std::vector<CommCost>& ops) {
  const double sp = s.sp, L = double(s.L);
  const double F = w.recompute == Recompute::Full ? 2 * L : L;  // layer forwards
  const auto hidden = [](double comm, double compute) { return std::max(0.0, comm - compute); };
  for (CommCost& op : ops) {
    if (op.gradient_reduction || op.op.calls == 0 || op.op.axis != "sp") continue;
    const double call = op.seconds / double(op.op.calls);
    if (op.op.op == "all_gather")
      op.exposed_s = F * hidden(2 * call, c.core_f / sp) +
                     L * hidden(2 * call, c.projection_b + c.core_b / sp);
    else if (op.op.op == "reduce_scatter")
      op.exposed_s = L * hidden(2 * call, c.projection_b);
  }
}

// A TSP schedule's exposed communication: its overlap as the schedule states it
// (parallel/strategies/tsp/schedule.h's TspOverlap), priced with the link model. Each
// position exposes what its messages take beyond the compute window they hide behind; a kind
// the schedule does not list (the embedding's all-to-alls) stays exposed.
void expose_overlap(const std::vector<parallel::TspOverlap>& schedule, const Link& link,
                    std::vector<CommCost>& ops) {
  const auto t = [&](double bytes) { return link.alpha_s + bytes / link.beta_Bps; };
  for (CommCost& op : ops) {
    if (op.gradient_reduction || op.op.calls == 0) continue;
    const auto kind = std::find_if(schedule.begin(), schedule.end(), [&](const auto& k) {
      return op.op.axis == k.comm && op.op.op == k.op;
    });
    if (kind == schedule.end()) continue;
    const double call = op.seconds / double(op.op.calls);  // one call's time
    op.exposed_s = 0;
    for (const parallel::TspOverlapPosition& at : kind->positions) {
      const double message = at.hop_bytes > 0 ? t(double(at.hop_bytes)) : call;
      op.exposed_s += at.count * std::max(0.0, at.messages * message - at.window);
    }
  }
}

parallel::TspComputeSeconds tsp_compute(const BlockSeconds& c) {
  return {.attention_f = c.attention_f,
          .attention_b = c.attention_b,
          .mlp_f = c.mlp_f,
          .mlp_b = c.mlp_b,
          .head_f = c.head_f,
          .head_b = c.head_b,
          .core_f = c.core_f,
          .core_b = c.core_b,
          .projection_b = c.projection_b};
}

// TSP's broadcast-ring schedule (docs/planner.md, "Step time"; docs/tsp.md).
void tsp_exposure(const Shapes& s, const Workload& w, const Link& link, const BlockSeconds& c,
                  std::vector<CommCost>& ops) {
  expose_overlap(parallel::tsp_overlap(s.tsp_rank(), w.elem.comm,
                                       w.recompute == Recompute::Full, tsp_compute(c)),
                 link, ops);
}

// TSP's allgather schedule (parallel/strategies/tsp_allgather/schedule.h): one block ahead.
void tsp_allgather_exposure(const Shapes& s, const Workload& w, const Link& link,
                            const BlockSeconds& c, std::vector<CommCost>& ops) {
  const auto shapes = parallel::tsp_allgather::make_shapes(s.D, s.block_rows, s.h, s.heads,
                                                           s.kv_heads, s.d, s.ffn);
  expose_overlap(parallel::tsp_allgather::overlap(shapes, s.L, s.vocab_rows * s.h * w.elem.comm,
                                                  w.recompute == Recompute::Full, tsp_compute(c)),
                 link, ops);
}

// The step's once-per-step operations: the gradient reductions, then the scalars, one row per
// axis and operation (the same collective on the same communicator).
std::vector<CommOp> step_operations(std::vector<CommOp> step, const std::vector<CommOp>& scalars) {
  for (const CommOp& scalar : scalars) {
    const auto same = std::find_if(step.begin(), step.end(), [&](const CommOp& o) {
      return o.axis == scalar.axis && o.op == scalar.op;
    });
    if (same == step.end()) {
      step.push_back(scalar);
    } else {
      same->calls += scalar.calls;
      same->bytes_sent += scalar.bytes_sent;
    }
  }
  return step;
}

// One operation's time on its axis's link (the rank's calls and bytes).
CommCost priced(const ModelConfig& m, const Layout& l, const Workload& w, const Hardware& hw,
                const CommOp& op, bool grads) {
  CommCost c;
  c.op = op;
  c.gradient_reduction = grads;
  // The kv-replica groups ("tp-kv", "tsp-kv"): consecutive ranks of the innermost weight
  // axis, kv_replicas of them, within a node when they tile it.
  const bool kv_group = op.axis == "tp-kv" || op.axis == "tsp-kv";
  const int n = kv_group ? parallel::kv_replicas(m, l.tp * l.tsp) : axis_size(l, op.axis);
  c.link = !kv_group ? link_class(l, op.axis, hw.devices_per_node)
           : n <= hw.devices_per_node && hw.devices_per_node % n == 0 ? LinkClass::Intra
                                                                      : LinkClass::Mixed;
  const double per_call = op.calls > 0 ? double(op.bytes_sent) / double(op.calls) : 0;
  const Link& link = link_of(hw, c.link);
  if ((op.op == "broadcast" || op.op == "reduce") && n > 1) {
    // A pipelined chain: every rank waits for the last chunk to cross n-1 hops, i.e.
    // (chunks + n - 2) chunk-hops; a rank sends the buffer on n-1 of every n calls.
    const double buffer = per_call * n / (n - 1);
    const double chunk = std::min(buffer, double(512 << 10));
    const double chunks = chunk > 0 ? std::ceil(buffer / chunk) : 0;
    c.seconds = double(op.calls) * (chunks + n - 2) * (link.alpha_s + chunk / link.beta_Bps);
  } else {
    c.seconds =
        link.seconds(double(op.bytes_sent),
                     double(op.calls) * messages_per_call(op.op, n, per_call, double(w.elem.comm)));
  }
  c.exposed_s = c.seconds;
  return c;
}

// The prediction of a share of the model on the dp/tp/sp/tsp axes of `l` (without pipeline
// stages: all of it; under pp one chunk, m holding its layers): per step, with `step` its
// once-per-step operations; `forward_s`, `backward_s` one micro-batch's passes (compute and
// exposed communication of each direction; their sum times grad_accum plus the exposed step
// operations is the share's step_s). Memory is the caller's.
struct SharePrediction {
  Prediction p;
  double forward_s = 0, backward_s = 0;
};
SharePrediction predict_share(const ModelConfig& m, const Layout& l, const Workload& w,
                              const Hardware& hw, ModelEnds ends, const std::vector<CommOp>& step) {
  Layout axes = l;  // the share's mesh: dp/tp/sp/tsp (the pp axis prices the boundary only)
  axes.pp = axes.pp_virtual = 1;
  axes.pp_layers.clear();
  Prediction p;
  p.micro_batch = w.batch;
  const Shapes s = shapes_of(m, axes, w);
  for (const CommOp& op : comm_per_micro_batch(m, axes, w, 0, ends))
    p.comm.push_back(priced(m, l, w, hw, op, false));
  for (const CommOp& op : step) p.comm.push_back(priced(m, l, w, hw, op, true));

  const double rate = hw.flops_per_s(w.bf16() ? Precision::bf16() : Precision::fp32());
  const double world = axes.world();
  const std::int64_t job_batch = w.batch * l.dp;  // each replica runs its own micro-batch
  const double tokens = double(job_batch) * double(w.seq);
  // The LM head's product h x V of every token, 2 FLOPs a multiply-add: a share without the
  // head runs none of it (6 of training_flops' 6·P·T, 2 of them in the forward).
  // The executed head runs the vocabulary padded to a multiple of the weight degree
  // (shapes.h's vocab_rows × T).
  const double vocab = double(m.vocab_size), padded = double(s.vocab_rows * s.T);
  const double head_params = ends.head ? double(m.hidden_size) * padded : 0;
  const double no_head = 6 * double(m.hidden_size) * vocab * tokens;
  const double padding = 6 * double(m.hidden_size) * (padded - vocab) * tokens;
  p.model_flops_per_device =
      (training_flops(m, job_batch, w.seq) - (ends.head ? 0 : no_head)) / world;
  p.executed_flops_per_device = (executed_training_flops(m, job_batch, w.seq, w.recompute) +
                                 (ends.head ? padding : -no_head)) /
                                world;
  // The forward's matrix products: 2·P·T over the layers' weights (and the head's).
  const double h = double(m.hidden_size), d = double(m.head_dim());
  const double layer_params =
      h * double(m.num_attention_heads) * d + 2 * h * double(m.num_key_value_heads) * d +
      double(m.num_attention_heads) * d * h + 3 * h * double(m.intermediate_size);
  double forward_flops =
      2 * (double(m.num_hidden_layers) * layer_params + head_params) * tokens / world;
  // Replicated kv heads: every replica projects its kv head's K and V again (the forward's
  // 4·h·Hkv·d per token, the backward's twice that, the recomputed forward under full).
  const double kv_repeats = parallel::kv_replicas(m, l.tp * l.tsp) - 1;
  if (kv_repeats > 0) {
    const double kv_forward =
        4.0 * double(m.hidden_size) * double(m.kv_dim()) * tokens * double(m.num_hidden_layers);
    p.executed_flops_per_device +=
        kv_repeats * kv_forward * (w.recompute == Recompute::Full ? 4 : 3) / world;
    forward_flops += kv_repeats * kv_forward / world;
  }
  BlockSeconds blocks = block_seconds(m, axes, w, rate);
  // Attention's core products: one causal document per row, or the packed documents' visible
  // pairs, the slowest rank's share of them in the time (docs/planner.md, "Packed documents").
  const double causal_core = 4.0 * double(m.head_dim()) * double(m.num_attention_heads) *
                             double(job_batch) * double(w.seq) * double(w.seq + 1) / 2 *
                             double(m.num_hidden_layers);  // one forward, the job's
  const double core_passes = 3.5 + (w.recompute == Recompute::Full ? 1.0 : 0.0);
  p.causal_attention_flops_per_device = core_passes * causal_core / world;
  p.attention_flops_per_device = p.causal_attention_flops_per_device;
  double slowest_extra = 0;  // FLOPs of the slowest rank's attention beyond the mean rank's
  if (w.documents != nullptr) {
    ORIGAMI_CHECK(w.documents->seq() == w.seq, "document sample of S = {} for seq {}",
                  w.documents->seq(), w.seq);
    const DocumentAttention a =
        document_attention(w.documents->layout, l.token_degree(), w.documents->rows, w.batch);
    const double masked = a.pairs_per_row / a.causal_pairs_per_row;
    p.attention_flops_per_device *= masked;
    p.attention_imbalance = a.imbalance_mean;
    p.attention_imbalance_worst = a.imbalance_worst;
    const double saved = p.causal_attention_flops_per_device - p.attention_flops_per_device;
    p.model_flops_per_device -= 3.5 / core_passes * saved;
    p.executed_flops_per_device -= saved;
    const double slowest_core = masked * a.slowest_over_mean;  // of the causal mean's
    slowest_extra = p.causal_attention_flops_per_device * (slowest_core - masked);
    const double core_f = blocks.core_f, core_b = blocks.core_b;
    blocks.core_f *= slowest_core;
    blocks.core_b *= slowest_core;
    blocks.attention_f += blocks.core_f - core_f;
    blocks.attention_b += blocks.core_b - core_b;
  }
  // The forward's attention core: one of the core_passes (forward 1, backward 2.5, full
  // recompute's forward 1 more).
  forward_flops += (p.attention_flops_per_device + slowest_extra) / core_passes;
  if (s.tsp() && ends.head) {
    // TSP's head ring recomputes each logits chunk in the backward (docs/tsp.md): the rank's
    // rows against every (padded) vocabulary block once more.
    const double again = 2.0 * double(s.h) * double(s.vocab_rows) * s.D * double(s.block_rows);
    p.executed_flops_per_device += again;
    blocks.head_b += again / rate;
  }
  // The slowest rank's attention beyond the mean's (packed documents on a split sequence).
  p.compute_s = (p.executed_flops_per_device + slowest_extra) / rate;
  if (s.allgather())
    tsp_allgather_exposure(s, w, link_of(hw, link_class(l, "tsp", hw.devices_per_node)), blocks,
                           p.comm);
  else if (s.tsp())
    tsp_exposure(s, w, link_of(hw, link_class(l, "tsp", hw.devices_per_node)), blocks, p.comm);
  else if (s.sp > 1)
    cp_exposure(s, w, blocks, p.comm);
  SharePrediction share;
  share.forward_s = forward_flops / rate;
  share.backward_s = p.compute_s - share.forward_s;
  for (const CommCost& c : p.comm) {  // a micro-batch's exposed time, split by its calls
    if (c.gradient_reduction || c.op.calls == 0) continue;
    const double forward = double(c.op.forward_calls) / double(c.op.calls);
    share.forward_s += forward * c.exposed_s;
    share.backward_s += (1 - forward) * c.exposed_s;
  }
  // Gradient accumulation: every micro-batch repeats the same schedule (and overlap); the
  // step's reductions run once, after the last.
  const std::int64_t k = w.grad_accum;
  p.model_flops_per_device *= double(k);
  p.executed_flops_per_device *= double(k);
  p.attention_flops_per_device *= double(k);
  p.causal_attention_flops_per_device *= double(k);
  p.compute_s *= double(k);
  for (CommCost& c : p.comm) {
    if (!c.gradient_reduction) {
      for (std::int64_t* v : {&c.op.calls, &c.op.bytes_sent, &c.op.forward_calls,
                              &c.op.forward_bytes, &c.op.layer_calls, &c.op.layer_bytes})
        *v *= k;
      c.seconds *= double(k);
      c.exposed_s *= double(k);
    }
    p.comm_s += c.seconds;
    p.exposed_comm_s += c.exposed_s;
  }
  p.step_s = p.compute_s + p.exposed_comm_s;
  share.p = std::move(p);
  return share;
}

// Sums of the rank's bytes by link class.
void count_bytes(Prediction& p) {
  p.comm_bytes_per_step = p.intra_bytes = p.inter_bytes = 0;
  for (const CommCost& c : p.comm) {
    p.comm_bytes_per_step += c.op.bytes_sent;
    (c.link == LinkClass::Intra ? p.intra_bytes : p.inter_bytes) += c.op.bytes_sent;
  }
}

// Adds `from`'s operations to `into`, one row per (axis, op, once per step or not).
void merge_comm(std::vector<CommCost>& into, const std::vector<CommCost>& from) {
  for (const CommCost& c : from) {
    const auto same = std::find_if(into.begin(), into.end(), [&](const CommCost& o) {
      return o.op.axis == c.op.axis && o.op.op == c.op.op &&
             o.gradient_reduction == c.gradient_reduction;
    });
    if (same == into.end()) {
      into.push_back(c);
      continue;
    }
    for (auto [to, add] : {std::pair{&same->op.calls, c.op.calls},
                           {&same->op.bytes_sent, c.op.bytes_sent},
                           {&same->op.forward_calls, c.op.forward_calls},
                           {&same->op.forward_bytes, c.op.forward_bytes},
                           {&same->op.layer_calls, c.op.layer_calls},
                           {&same->op.layer_bytes, c.op.layer_bytes}})
      *to += add;
    same->seconds += c.seconds;
    same->exposed_s += c.exposed_s;
  }
}

// pp rank `stage`: its chunks' shares, the step's scalars (once a rank) and its boundary
// messages on the pp axis (docs/planner.md, "Pipeline step time").
StagePrediction predict_stage(const ModelConfig& m, const Layout& l, const Workload& w,
                              const Hardware& hw, const parallel::PipelineSplit& split, int stage) {
  StagePrediction st;
  st.memory = memory_of_stage(m, l, w, stage);
  st.memory.overhead = hw.runtime_overhead_bytes;
  Layout axes = l;
  axes.pp = axes.pp_virtual = 1;
  axes.pp_layers.clear();
  const int last_chunk = split.chunk_count() - 1;
  std::vector<CommCost> comm;
  for (int local = 0; local < split.virtual_stages; ++local) {
    const int chunk = split.chunk_of(stage, local);
    ModelConfig part = m;
    part.num_hidden_layers = split.layers_of(stage, local).count;
    st.layers += part.num_hidden_layers;
    const ModelEnds ends{.embedding = chunk == 0, .head = chunk == last_chunk};
    std::vector<CommOp> step =
        comm_gradient_reduction(part, axes, w.elem, 0, w.shard_optimizer, ends);
    if (local == 0)
      step = step_operations(std::move(step), comm_step_scalars(l, 0, w.shard_optimizer, stage));
    const SharePrediction share = predict_share(part, l, w, hw, ends, step);
    merge_comm(comm, share.p.comm);
    st.model_flops += share.p.model_flops_per_device;
    st.executed_flops += share.p.executed_flops_per_device;
    st.attention_flops += share.p.attention_flops_per_device;
    st.causal_attention_flops += share.p.causal_attention_flops_per_device;
    st.attention_imbalance = share.p.attention_imbalance;
    st.attention_imbalance_worst = share.p.attention_imbalance_worst;
    st.compute_s += share.p.compute_s;
    st.forward_s.push_back(share.forward_s);
    st.backward_s.push_back(share.backward_s);
  }
  // The boundary: [stream rows, h] of the rank's own rows to the next (previous) stage's rank
  // at the same dp/tp/sp/tsp coordinates, one message per pass that has a neighbour.
  const Shapes s = shapes_of(m, axes, w);
  st.boundary_bytes = s.stream_rows * s.h * w.elem.comm;
  st.boundary_link = link_class(l, "pp", hw.devices_per_node);
  const Link& link = link_of(hw, st.boundary_link);
  st.hop_s = link.seconds(double(st.boundary_bytes), 1);
  const parallel::BoundarySends n =
      parallel::pipeline_boundary_sends(split, stage, static_cast<int>(w.grad_accum));
  CommCost sends;
  sends.op = {.axis = "pp",
              .op = "send",
              .calls = n.forward + n.backward,
              .bytes_sent = (n.forward + n.backward) * st.boundary_bytes,
              .forward_calls = n.forward,
              .forward_bytes = n.forward * st.boundary_bytes};
  sends.link = st.boundary_link;
  sends.seconds = double(sends.op.calls) * st.hop_s;  // on the pipeline clock, not exposed
  CommCost recvs;
  recvs.op = {.axis = "pp",
              .op = "recv",
              .calls = n.forward_recvs + n.backward_recvs,
              .forward_calls = n.forward_recvs};
  recvs.link = st.boundary_link;
  for (CommCost* c : {&sends, &recvs})
    if (c->op.calls > 0) comm.push_back(*c);
  st.comm = std::move(comm);
  for (const CommCost& c : st.comm) {
    st.exposed_comm_s += c.exposed_s;
    if (c.gradient_reduction) st.reduction_s += c.exposed_s;
  }
  st.busy_s = st.reduction_s;
  for (std::size_t i = 0; i < st.forward_s.size(); ++i)
    st.busy_s += double(w.grad_accum) * (st.forward_s[i] + st.backward_s[i]);
  return st;
}

// Under pp: every stage, the schedule's clock over their passes, then the step reductions.
Prediction predict_pipeline(const ModelConfig& m, const Layout& l, const Workload& w,
                            const Hardware& hw) {
  Prediction p;
  p.micro_batch = w.batch;
  p.memory = memory_per_device(m, l, w);  // the worst stage's; checks the split and schedule
  p.memory.overhead = hw.runtime_overhead_bytes;
  p.fits = p.memory.total() <= hw.memory_bytes;
  const parallel::PipelineSplit split = parallel::stage_layers(l, m.num_hidden_layers);
  const int micro = static_cast<int>(w.grad_accum);
  std::vector<double> forward(static_cast<std::size_t>(split.chunk_count()));
  std::vector<double> backward(forward.size());
  double hop = 0, reductions = 0;
  for (int stage = 0; stage < split.stages; ++stage) {
    StagePrediction st = predict_stage(m, l, w, hw, split, stage);
    for (int local = 0; local < split.virtual_stages; ++local) {
      const auto c = static_cast<std::size_t>(split.chunk_of(stage, local));
      forward[c] = st.forward_s[static_cast<std::size_t>(local)];
      backward[c] = st.backward_s[static_cast<std::size_t>(local)];
    }
    hop = st.hop_s;  // the same rows on every stage
    reductions = std::max(reductions, st.reduction_s);
    p.stages.push_back(std::move(st));
  }
  const parallel::PipelineClock clock = parallel::pipeline_seconds(
      forward, backward, split.stages, split.virtual_stages, micro, hop, hop);
  // The stages' reductions run side by side after the pipeline's closing barrier; the step's
  // scalars over pp wait for the slowest.
  p.step_s = clock.step_s + reductions;
  p.bubble = clock.bubble();
  const auto busiest = std::max_element(
      p.stages.begin(), p.stages.end(),
      [](const StagePrediction& a, const StagePrediction& b) { return a.busy_s < b.busy_s; });
  p.comm = busiest->comm;
  p.model_flops_per_device = busiest->model_flops;
  p.executed_flops_per_device = busiest->executed_flops;
  p.attention_flops_per_device = busiest->attention_flops;
  p.causal_attention_flops_per_device = busiest->causal_attention_flops;
  p.attention_imbalance = busiest->attention_imbalance;
  p.attention_imbalance_worst = busiest->attention_imbalance_worst;
  p.compute_s = busiest->compute_s;
  for (const CommCost& c : p.comm) p.comm_s += c.seconds;
  p.exposed_comm_s = busiest->exposed_comm_s;
  count_bytes(p);
  p.tokens_per_s = double(w.batch * l.dp) * double(w.seq) * double(w.grad_accum) / p.step_s;
  return p;
}

}  // namespace

Prediction predict(const ModelConfig& m, const Layout& l, const Workload& workload,
                   const Hardware& hw) {
  const Workload w = per_replica(workload, l);
  if (l.pp > 1) return predict_pipeline(m, l, w, hw);
  const Memory memory = memory_per_device(m, l, w);
  Prediction p =
      predict_share(m, l, w, hw, {},
                    step_operations(comm_gradient_reduction(m, l, w.elem, 0, w.shard_optimizer),
                                    comm_step_scalars(l, 0, w.shard_optimizer)))
          .p;
  p.memory = memory;
  p.memory.overhead = hw.runtime_overhead_bytes;
  p.fits = p.memory.total() <= hw.memory_bytes;
  count_bytes(p);
  p.tokens_per_s = double(w.batch * l.dp) * double(w.seq) * double(w.grad_accum) / p.step_s;
  return p;
}

}  // namespace origami::plan
