#include "origami/plan/predict.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "origami/core/error.h"
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
  // Innermost first: tp, tsp, sp, dp (the most talkative axis innermost).
  const std::vector<std::pair<std::string, int>> order{
      {"tp", l.tp}, {"tsp", l.tsp}, {"sp", l.sp}, {"dp", l.dp}};
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

}  // namespace

Prediction predict(const ModelConfig& m, const Layout& l, const Workload& workload,
                   const Hardware& hw) {
  const Workload w = per_replica(workload, l);
  Prediction p;
  p.micro_batch = w.batch;
  p.memory = memory_per_device(m, l, w);
  p.memory.overhead = hw.runtime_overhead_bytes;
  p.fits = p.memory.total() <= hw.memory_bytes;
  const Shapes s = shapes_of(m, l, w);

  const auto add = [&](const std::vector<CommOp>& ops, bool grads) {
    for (const CommOp& op : ops) {
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
        c.seconds = link.seconds(double(op.bytes_sent),
                                 double(op.calls) * messages_per_call(op.op, n, per_call,
                                                                      double(w.elem.comm)));
      }
      c.exposed_s = c.seconds;
      p.comm.push_back(std::move(c));
    }
  };
  add(comm_per_micro_batch(m, l, w), false);
  // Once per step: the weight gradients' all-reduces and the scalars', one row per axis and
  // operation (they are the same collective on the same communicator).
  std::vector<CommOp> step = comm_gradient_reduction(m, l, w.elem, 0, w.shard_optimizer);
  for (const CommOp& scalar : comm_step_scalars(l, 0, w.shard_optimizer)) {
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
  add(step, true);

  const double rate = hw.flops_per_s(w.bf16() ? Precision::bf16() : Precision::fp32());
  const std::int64_t job_batch = w.batch * l.dp;  // each replica runs its own micro-batch
  p.model_flops_per_device = training_flops(m, job_batch, w.seq) / l.world();
  p.executed_flops_per_device = executed_training_flops(m, job_batch, w.seq, w.recompute) / l.world();
  // Replicated kv heads: every replica projects its kv head's K and V again (the forward's
  // 4·h·Hkv·d per token, the backward's twice that, the recomputed forward under full).
  const double kv_repeats = parallel::kv_replicas(m, l.tp * l.tsp) - 1;
  if (kv_repeats > 0) {
    const double kv_forward = 4.0 * double(m.hidden_size) * double(m.kv_dim()) *
                              double(job_batch) * double(w.seq) * double(m.num_hidden_layers);
    p.executed_flops_per_device += kv_repeats * kv_forward *
                                   (w.recompute == Recompute::Full ? 4 : 3) / l.world();
  }
  BlockSeconds blocks = block_seconds(m, l, w, rate);
  // Attention's core products: one causal document per row, or the packed documents' visible
  // pairs, the slowest rank's share of them in the time (docs/planner.md, "Packed documents").
  const double causal_core = 4.0 * double(m.head_dim()) * double(m.num_attention_heads) *
                             double(job_batch) * double(w.seq) * double(w.seq + 1) / 2 *
                             double(m.num_hidden_layers);  // one forward, the job's
  const double core_passes = 3.5 + (w.recompute == Recompute::Full ? 1.0 : 0.0);
  p.causal_attention_flops_per_device = core_passes * causal_core / l.world();
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
  if (s.tsp()) {
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
  p.comm_bytes_per_step = p.intra_bytes = p.inter_bytes = 0;
  for (const CommCost& c : p.comm) {
    p.comm_bytes_per_step += c.op.bytes_sent;
    (c.link == LinkClass::Intra ? p.intra_bytes : p.inter_bytes) += c.op.bytes_sent;
  }
  p.step_s = p.compute_s + p.exposed_comm_s;
  p.tokens_per_s = double(job_batch) * double(w.seq) * double(k) / p.step_s;
  return p;
}

}  // namespace origami::plan
