#include "origami/plan/cost_model.h"

#include "origami/parallel/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "origami/comm/collectives/bytes_sent.h"
#include "origami/comm/communicator.h"
#include "origami/core/error.h"
#include "origami/parallel/pipeline_boundary.h"
#include "origami/parallel/strategies/mesh/schedule.h"
#include "origami/parallel/strategies/tsp_allgather/schedule.h"
#include "origami/plan/buffers.h"
#include "origami/plan/limits.h"
#include "origami/plan/shapes.h"

namespace origami::plan {

namespace ag = parallel::tsp_allgather;

std::string json_strategy(const Mesh& m) {
  if (m.is_tsp())
    return m.tsp_schedule == parallel::TspSchedule::Allgather ? "tsp-allgather" : "tsp";
  if (m.tp > 1) return m.sp > 1 ? "tpsp" : "tp";
  if (m.sp > 1) return "sp";
  return m.dp > 1 ? "dp" : "single";
}

ElementSizes ElementSizes::of(const Precision& p) {
  ElementSizes e;
  e.param = p.parameters;
  e.grad = p.gradients;
  e.optimizer = p.moments;
  e.master = p.master;
  e.activation = p.activations;
  e.comm = p.communication;
  e.logits = p.logits;
  return e;
}


Workload per_replica(const Workload& w, const Mesh& mesh) {
  if (w.global_batch <= 0) return w;
  const std::int64_t split = std::int64_t{mesh.dp} * w.grad_accum;
  if (w.global_batch % split != 0)
    throw ConfigError(fmt::format("the global batch of {} sequences does not split into dp={} "
                                  "replicas x {} micro-batches; use a global batch that is a "
                                  "multiple of {}",
                                  w.global_batch, mesh.dp, w.grad_accum, split));
  Workload x = w;
  x.batch = w.global_batch / split;
  return x;
}

void check_layout(const ModelConfig& m, const Mesh& mesh, const Workload& w) {
  if (mesh.dp < 1 || mesh.tp < 1 || mesh.sp < 1 || mesh.tsp < 1)
    throw ConfigError(fmt::format("mesh degrees must be >= 1 (dp={}, tp={}, sp={}, tsp={})",
                                  mesh.dp, mesh.tp, mesh.sp, mesh.tsp));
  if (w.grad_accum < 1)
    throw ConfigError(fmt::format("--grad-accum must be >= 1 (got {})", w.grad_accum));
  if (w.batch < 1 || w.seq < 1)
    throw ConfigError(fmt::format("batch and sequence must be >= 1 (got {} and {})", w.batch,
                                  w.seq));
  // The engine's own rules (the strategy registry), so that a row the planner predicts is a
  // layout the engine runs, refused with the engine's words otherwise.
  Mesh plan = mesh;
  plan.layout = w.contiguous ? parallel::TokenLayoutKind::Contiguous
                             : parallel::TokenLayoutKind::Zigzag;
  refuse_mixture_of_experts(m, "the planner");  // its expert traffic model: not built
  parallel::validate_plan(plan, m, w.seq, w.batch, plan.world());
}

Shapes shapes_of(const ModelConfig& m, const Mesh& mesh, const Workload& w) {
  check_layout(m, mesh, w);
  Shapes s{};
  s.T = mesh.tp * mesh.tsp;
  s.D = mesh.tsp;
  s.sp = mesh.sp;
  s.dp = mesh.dp;
  s.seqpar = mesh.sequence_parallel && mesh.tp > 1;
  s.h = m.hidden_size;
  s.d = m.head_dim();
  s.L = m.num_hidden_layers;
  s.H = m.num_attention_heads;
  s.Hkv = m.num_key_value_heads;
  s.f = m.intermediate_size;
  s.V = m.vocab_size;
  s.heads = s.H / s.T;
  s.kv_heads = parallel::kv_heads_per_rank(m, static_cast<int>(s.T));  // 1: replicated
  s.ffn = s.f / s.T;
  s.qd = s.heads * s.d;
  s.kvd = s.kv_heads * s.d;
  s.vocab_rows = (s.V + s.T - 1) / s.T;  // V padded to a multiple of the degree, split
  s.block_rows = w.batch * (w.seq / (mesh.sp * mesh.tsp));  // each replica's own micro-batch
  s.stream_rows = s.seqpar ? s.block_rows / mesh.tp : s.block_rows;
  s.rope_positions = std::max<std::int64_t>(m.max_position_embeddings, w.seq);
  s.tied = m.tie_word_embeddings;
  s.schedule = mesh.tsp_schedule;
  return s;
}

namespace {

// What one rank holds of the model: without pipeline stages all of it (one pass in flight);
// pp rank `stage` the layers of its chunks, the embedding on stage 0 and the final norm and
// the LM head on the last (parallel/pipeline_stages.h's mapping), with pipeline_in_flight
// passes' saved activations at once (parallel/pipeline_schedule.h).
struct Share {
  bool embedding = true, head = true;
  std::vector<std::int64_t> chunk_layers;  // the layers of each chunk the rank holds
  std::int64_t layers() const {
    std::int64_t n = 0;
    for (const std::int64_t c : chunk_layers) n += c;
    return n;
  }
  std::int64_t largest_chunk() const {
    return *std::max_element(chunk_layers.begin(), chunk_layers.end());
  }
  int in_flight = 1;  // passes whose forward ran and backward did not, at most
  // Boundary row blocks [Rs, h] the rank holds at most at once (pipeline_boundary.h).
  parallel::BoundaryBlocks boundary;
};

Share whole_model(const Shapes& s) {
  Share share;
  share.chunk_layers = {s.L};
  return share;
}

// Elements of each gradient tensor this rank holds, and whether it is an RMSNorm weight.
std::vector<std::pair<std::int64_t, bool>> rank_tensors(const Shapes& s, const Share& share) {
  std::vector<std::pair<std::int64_t, bool>> t;
  if (share.embedding) t.emplace_back(s.vocab_rows * s.h, false);
  for (std::int64_t l = 0; l < share.layers(); ++l) {
    t.emplace_back(s.h, true);                          // input norm
    t.emplace_back(s.heads * s.d * s.h, false);         // wq
    t.emplace_back(s.kv_heads * s.d * s.h, false);      // wk
    t.emplace_back(s.kv_heads * s.d * s.h, false);      // wv
    t.emplace_back(s.h * s.heads * s.d, false);         // wo
    t.emplace_back(s.h, true);                          // post-attention norm
    for (int k = 0; k < 3; ++k) t.emplace_back(s.ffn * s.h, false);  // gate, up, down
  }
  if (share.head) {
    t.emplace_back(s.h, true);                             // final norm
    if (!s.tied) t.emplace_back(s.vocab_rows * s.h, false);  // LM head (tied: the embedding's)
  }
  return t;
}

Memory memory_of_share(const Shapes& s, const Mesh& mesh, const Workload& w, const Share& share) {
  std::int64_t elems = 0;
  for (const auto& [n, norm] : rank_tensors(s, share)) elems += n;
  Memory mem;
  mem.parameters = elems * w.elem.param;
  mem.gradients = elems * w.elem.grad;
  mem.optimizer = elems * (2 * w.elem.optimizer + w.elem.master);  // moments + master copy
  if (w.shard_optimizer && mesh.dp > 1) {  // dp rank 0's slices (the largest when uneven)
    std::int64_t slices = 0;
    for (const auto& [n, norm] : rank_tensors(s, share)) slices += comm::balanced_counts(n, mesh.dp)[0];
    mem.optimizer = slices * (2 * w.elem.optimizer + w.elem.master);
  }

  // What one layer saves (driver.h): input and post-attention residual [Rs, h], two rstd [Rs];
  // attention q, out [Rb, H/T·d], k, v [Rb, Kv/T·d], lse [Rb·H/T]; MLP gate/up [Rb, f/T].
  // Under TSP the D head groups' and MLP shards' slots are all saved (heads etc. are one
  // group's): `groups` = D.
  const std::int64_t groups = s.D;
  const std::int64_t Rs = s.stream_rows, Rb = s.block_rows;
  const std::int64_t stream = 2 * Rs * s.h + 2 * Rs;
  const std::int64_t attention = groups * Rb * (2 * s.qd + 2 * s.kvd + s.heads);
  const std::int64_t mlp = groups * 2 * Rb * s.ffn;
  const std::int64_t final_rstd = share.head ? Rs : 0;
  // The layers whose saved state is held at once: every pass in flight's (the largest chunk's
  // each, an upper bound when the rank's chunks differ).
  const std::int64_t held = std::int64_t{share.in_flight} * share.largest_chunk();
  std::int64_t act = 0;
  switch (w.recompute) {
    case Recompute::None:  // everything of every layer, then the final norm's rstd
      act = held * (stream + attention + mlp) + final_rstd;
      break;
    case Recompute::Mlp:  // the last layer's gate/up live until its forward ends
      act = held * (stream + attention) + std::max(mlp, final_rstd);
      break;
    case Recompute::Full:  // every layer's input; the last layer re-run saving everything
      act = held * Rs * s.h + final_rstd + (stream + attention + mlp);
      break;
  }
  mem.activations = act * w.elem.activation;
  // One [rows, V/T] block at a time (TSP: one [rows, chunk] block of the vocabulary ring).
  if (share.head) mem.logits = Rb * (s.tsp() ? s.head_chunk_rows() : s.vocab_rows) * w.elem.logits;
  // Under pp the boundary blocks are held beside the layers' buffers (their peaks added: an
  // upper bound).
  mem.comm_buffers = comm_buffers_peak(s, w) + share.boundary.comm_buffers * Rs * s.h * w.elem.comm;
  mem.workspace =
      workspace_peak(s, w, share.boundary.workspace_forward, share.boundary.workspace_backward);
  return mem;
}

}  // namespace

Memory memory_per_device(const ModelConfig& m, const Mesh& mesh, const Workload& w) {
  if (mesh.pp > 1) {  // the worst stage's
    Memory worst;
    for (int stage = 0; stage < mesh.pp; ++stage) {
      const Memory here = memory_of_stage(m, mesh, w, stage);
      if (stage == 0 || here.total() > worst.total()) worst = here;
    }
    return worst;
  }
  check_countable(m, w);  // before any int64 product of the sizes
  const Shapes s = shapes_of(m, mesh, w);
  return memory_of_share(s, mesh, w, whole_model(s));
}

Memory memory_of_stage(const ModelConfig& m, const Mesh& mesh, const Workload& w, int stage) {
  check_countable(m, w);
  parallel::check_pipeline_model(mesh, m);
  const parallel::PipelineSplit split = parallel::stage_layers(mesh, m.num_hidden_layers);
  const int micro = static_cast<int>(w.grad_accum);
  parallel::check_pipeline_schedule(split.stages, split.virtual_stages, micro);
  if (stage < 0 || stage >= split.stages)
    throw ConfigError(fmt::format("pipeline stage {} of pp={}", stage, split.stages));
  const Shapes s = shapes_of(m, mesh, w);
  Share share;
  share.embedding = stage == 0;
  share.head = stage == split.stages - 1;
  for (int local = 0; local < split.virtual_stages; ++local)
    share.chunk_layers.push_back(split.layers_of(stage, local).count);
  share.in_flight = parallel::pipeline_in_flight(split.stages, split.virtual_stages, stage, micro);
  share.boundary = parallel::pipeline_boundary_blocks(split, stage, micro);
  return memory_of_share(s, mesh, w, share);
}

std::int64_t all_gather_sent(std::int64_t block_count, int n, std::int64_t elem) {
  return comm::ring_blocks_sent(block_count * elem, n);
}

std::int64_t reduce_scatter_sent(std::int64_t block_count, int n, std::int64_t elem) {
  return comm::ring_blocks_sent(block_count * elem, n);
}

std::int64_t all_reduce_sent(std::int64_t count, int n, int r, std::int64_t elem) {
  return comm::ring_all_reduce_sent(count, n, r, elem);
}

namespace {

// Accumulates (axis, op) -> calls, bytes in a stable order.
class Ledger {
 public:
  // `calls` issues of `bytes_per_call` each, in the forward or backward pass, inside the
  // layers (counted per layer) or once per model.
  void add(const std::string& axis, const std::string& op, std::int64_t calls,
           std::int64_t bytes_per_call, Phase phase, bool in_layers) {
    add_total(axis, op, calls, calls * bytes_per_call, phase, in_layers);
  }
  // `calls` issues sending `bytes` together (calls that send different amounts).
  void add_total(const std::string& axis, const std::string& op, std::int64_t calls,
                 std::int64_t bytes, Phase phase, bool in_layers) {
    if (calls == 0) return;
    auto [it, fresh] = index_.try_emplace(axis + "/" + op, ops_.size());
    if (fresh) ops_.push_back({axis, op, 0, 0});
    CommOp& o = ops_[it->second];
    o.calls += calls;
    o.bytes_sent += bytes;
    if (phase == Phase::Forward) {
      o.forward_calls += calls;
      o.forward_bytes += bytes;
    }
    if (in_layers) {
      o.layer_calls += calls;
      o.layer_bytes += bytes;
    }
  }
  // For the step's gradient reductions (neither pass, not in the layers).
  void add(const std::string& axis, const std::string& op, std::int64_t bytes) {
    add(axis, op, 1, bytes, Phase::Step, false);
  }
  std::vector<CommOp> take() { return std::move(ops_); }

 private:
  std::map<std::string, std::size_t> index_;
  std::vector<CommOp> ops_;
};

}  // namespace

std::vector<CommOp> comm_per_micro_batch(const ModelConfig& m, const Mesh& mesh, const Workload& w,
                                         int axis_rank, ModelEnds ends) {
  const Shapes s = shapes_of(m, mesh, w);
  const std::int64_t e = w.elem.comm, L = s.L;
  if (mesh.world() == 1 || (mesh.dp == mesh.world())) return {};
  constexpr Phase Fwd = Phase::Forward, Bwd = Phase::Backward;
  constexpr bool kLayer = true;
  // Full recompute re-runs each layer's forward (its collectives included) in backward.
  const std::int64_t rerun = w.recompute == Recompute::Full ? L : 0;
  // The blocks the rank holds ("embedding", "head", and the layers' "attention" and "mlp").
  const auto held = [&](const char* block) {
    const std::string b = block;
    return (b != "embedding" || ends.embedding) && (b != "head" || ends.head);
  };
  Ledger out;
  if (s.tsp()) {
    // TSP's messages as its schedule states them (parallel/strategies/tsp/schedule.h). Under
    // the allgather schedule the layers' messages are that schedule's (strategies/
    // tsp_allgather/schedule.h, floats per layer); the embedding's and the LM head's are TSP's.
    const bool allgather = mesh.tsp_schedule == parallel::TspSchedule::Allgather;
    if (allgather) {
      const ag::Shapes g = ag::shapes(m, s.D, w.batch, w.seq);
      const std::int64_t weights = ag::weight_gather_floats(g) * e;
      out.add_total("tsp_shards", "all_gather", L * ag::weight_gather_calls(), L * weights, Fwd,
                    kLayer);
      out.add_total("tsp_shards", "all_gather", (rerun + L) * ag::weight_gather_calls(),
                    (rerun + L) * weights, Bwd, kLayer);
      out.add_total("tsp_grads", "reduce_scatter", L * ag::weight_gather_calls(),
                    L * ag::weight_reduce_scatter_floats(g) * e, Bwd, kLayer);
      out.add_total("tsp", "all_gather", L * ag::kv_gather_calls(g),
                    L * ag::kv_gather_floats(g) * e, Fwd, kLayer);
      out.add_total("tsp", "all_gather", (rerun + L) * ag::kv_gather_calls(g),
                    (rerun + L) * ag::kv_gather_floats(g) * e, Bwd, kLayer);
      out.add_total("tsp", "reduce_scatter", L * ag::kv_gather_calls(g),
                    L * ag::kv_reduce_scatter_floats(g) * e, Bwd, kLayer);
    }
    for (const parallel::TspTraffic& t :
         parallel::tsp_traffic(s.tsp_rank(), e, w.recompute == Recompute::Full))
      if ((!allgather || !t.in_layers) && held(t.block))
        out.add_total(t.comm, t.op, t.calls, t.bytes, t.forward ? Fwd : Bwd, t.in_layers);
    return out.take();
  }
  // The baselines' messages as their schedule states them (parallel/strategies/mesh/
  // schedule.h); an all-reduce's bytes are those of rank axis_rank of the tensor axis.
  for (const parallel::MeshTraffic& t :
       parallel::mesh_traffic(s.mesh_rank(), e, w.recompute == Recompute::Full, axis_rank))
    if (held(t.block))
      out.add_total(t.comm, t.op, t.calls, t.bytes, t.forward ? Fwd : Bwd, t.in_layers);
  return out.take();
}

std::vector<CommOp> comm_gradient_reduction(const ModelConfig& m, const Mesh& mesh,
                                            const ElementSizes& elem, int axis_rank,
                                            bool shard_optimizer, ModelEnds ends) {
  Workload w;
  w.batch = 1;
  w.seq = 2 * mesh.sp * mesh.tp * mesh.tsp;  // shapes of the weights only: any valid workload
  const Shapes s = shapes_of(m, mesh, w);
  Ledger out;
  // The gradients' messages count at the gradients' own size (--grad-reduce-dtype: 4 or 2
  // bytes), the sharded optimizer's all-gathers at the fp32 master weights' (4), as the real
  // run sends them: not at the profile's communication size (dryrun::MessagesAt).
  const std::int64_t g = elem.grad, master = elem.master > 0 ? elem.master : elem.param;
  const bool sharded = shard_optimizer && mesh.dp > 1;
  // The rank's dp slice of an n-element tensor (dp rank axis_rank % dp).
  const auto slice = [&](std::int64_t n) {
    return sharded ? comm::balanced_counts(n, mesh.dp)[static_cast<std::size_t>(axis_rank % mesh.dp)] : n;
  };
  Share share = whole_model(s);
  share.embedding = ends.embedding;
  share.head = ends.head;
  for (const auto& [n, norm] : rank_tensors(s, share)) {
    if (norm && mesh.tsp > 1)
      out.add("tsp", "all_reduce", all_reduce_sent(n, mesh.tsp, axis_rank, g));
    if (mesh.sp > 1) out.add("sp", "all_reduce", all_reduce_sent(n, mesh.sp, axis_rank, g));
    if (sharded) {
      // The ring's halves: the reduce-scatter sends every block but the rank's, the
      // all-gather every block but the next rank's.
      const std::vector<std::int64_t> b = comm::balanced_counts(n, mesh.dp);
      const int r = axis_rank % mesh.dp;
      out.add("dp", "reduce_scatter", (n - b[static_cast<std::size_t>(r)]) * g);
      out.add("dp", "all_gather", (n - b[static_cast<std::size_t>((r + 1) % mesh.dp)]) * master);
    } else if (mesh.dp > 1) {
      out.add("dp", "all_reduce", all_reduce_sent(n, mesh.dp, axis_rank, g));
    }
    if (norm && mesh.sequence_parallel && mesh.tp > 1)
      out.add("tp", "all_reduce", all_reduce_sent(slice(n), mesh.tp, axis_rank, g));
  }
  // More weight-axis ranks than kv heads: each layer's k and v blocks are held by `replicas`
  // consecutive ranks, whose gradients are summed over that group (assign_reduction_axes).
  const int replicas = parallel::kv_replicas(m, static_cast<int>(s.T));
  if (replicas > 1)
    for (std::int64_t i = 0; i < 2 * s.L; ++i)
      out.add(mesh.tsp > 1 ? "tsp-kv" : "tp-kv", "all_reduce",
              all_reduce_sent(slice(s.kvd * s.h), replicas, axis_rank % replicas, g));
  return out.take();
}

std::vector<CommOp> comm_step_scalars(const Mesh& mesh, int axis_rank, bool shard_optimizer,
                                      int stage) {
  Ledger out;
  const auto scalars = [&](const char* axis, int n, int calls, int rank) {
    for (int i = 0; i < calls && n > 1; ++i)
      out.add(axis, "all_reduce", all_reduce_sent(1, n, rank, 8));
  };
  const bool tsp = mesh.tsp > 1;
  scalars(tsp ? "tsp" : "sp", tsp ? mesh.tsp : mesh.sp, 2, axis_rank);  // label count, loss sum
  scalars("dp", mesh.dp, 2, axis_rank);
  scalars(tsp ? "tsp" : "tp", tsp ? mesh.tsp : mesh.tp, 1, axis_rank);  // the weights' squares
  // Sharded optimizer: the squares of the slices, each group (the weight-sharded tensors', the
  // replicated ones') summed over dp too.
  if (shard_optimizer) scalars("dp", mesh.dp, (tsp ? mesh.tsp : mesh.tp) > 1 ? 2 : 1, axis_rank);
  if (mesh.pp > 1) {  // the loss sum and the squares over the stages; the closing barrier
    scalars("pp", mesh.pp, 2, stage);
    out.add_total("pp", "barrier", 1, 0, Phase::Step, false);
  }
  return out.take();
}

double training_flops(const ModelConfig& m, std::int64_t batch, std::int64_t seq) {
  const double h = static_cast<double>(m.hidden_size), d = static_cast<double>(m.head_dim());
  const double H = static_cast<double>(m.num_attention_heads);
  const double Hkv = static_cast<double>(m.num_key_value_heads);
  const double f = static_cast<double>(m.intermediate_size), V = static_cast<double>(m.vocab_size);
  const double L = static_cast<double>(m.num_hidden_layers);
  const double B = static_cast<double>(batch), S = static_cast<double>(seq);
  const double P = L * (h * H * d + 2 * h * Hkv * d + H * d * h + 3 * h * f) + h * V;
  return 6 * P * B * S + 3.5 * 4 * d * H * B * S * (S + 1) / 2 * L;
}

}  // namespace origami::plan
