#include "origami/plan/inference.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/parallel/inference_degree.h"
#include "origami/plan/buffers.h"
#include "origami/plan/shapes.h"

namespace origami::plan {

namespace {

// Prefill (infer/engine.cpp: the TSP forward through parallel/tsp_*.cpp, then the head on each
// prompt's last row). R = B·S/D rows per rank; A, M the packed attention and MLP shards.
InferenceMemory prefill_memory(const Shapes& s, const Workload& w, std::int64_t resident_kv,
                               std::int64_t parameters) {
  const std::int64_t ea = w.elem.activation, ec = w.elem.comm, D = s.D, R = s.block_rows;
  const std::int64_t h = s.h, B = w.batch;
  InferenceMemory m;
  m.parameters = parameters;
  m.kv_cache = resident_kv;  // allocated before the forward, filled by its K/V gathers
  if (D > 1) {
    // The training forward's resident sets: two shard buffers + one head group's K/V gathers
    // in flight + the previous group's remote rows; the MLP's current and incoming shards
    // with the next layer's P_0, P_1 prefetched; the embedding's looked-up rows and rows back
    // (ids spread evenly: R; the real count is data dependent). No head ring: the engine's
    // head is local.
    const TspResident r = tsp_resident_set(s, Recompute::None, ec);
    m.comm_buffers = std::max({r.attention_forward, r.mlp_forward, r.embedding});
  } else {
    // One shard buffer and no gathers (tsp_attention.cpp: min(D, 2) buffers, nothing
    // prefetched at D = 1); the MLP still allocates current and incoming.
    const std::int64_t A = parallel::tsp_attention_shard_floats(s.tsp_rank()) * ec;
    const std::int64_t M = parallel::tsp_mlp_shard_floats(s.tsp_rank()) * ec;
    m.comm_buffers = std::max({A, 2 * M, 2 * R * h * ec});
  }
  // Saved tensors of one layer, dropped after it: every head group's q, k, v, out, lse, or
  // every MLP shard's gate and up pre-activations.
  const std::int64_t attention_saved = D * R * (2 * s.qd + 2 * s.kvd) + D * R * s.heads;
  const std::int64_t mlp_saved = 2 * D * R * s.ffn;
  m.activations = std::max(attention_saved, mlp_saved) * ea;
  // The engine's x, n, rstd; the attention's W_O copies (two when D > 1) and, D > 1, the remote
  // rows' partial output and lse; the MLP's gated rows of one shard; the RoPE tables twice
  // (the engine's, kept for decode, and the TSP operations' own, StrategyContext).
  const std::int64_t stream = 2 * R * h + R;
  const std::int64_t attention =
      stream + (D > 1 ? parallel::tsp_workspace(s.tsp_rank(), false).attention_forward +
                            R * (s.qd + s.heads)
                      : h * s.qd);
  const std::int64_t mlp = stream + R * s.ffn;
  const std::int64_t head = 2 * B * h + B;  // the last rows, the final norm's output and rstd
  m.workspace = (2 * s.rope_positions * s.d + std::max({attention, mlp, head})) * ea;
  m.logits = B * s.vocab_rows * w.elem.logits;  // the last rows' logits only
  return m;
}

// One decode step (engine.cpp decode): [B, h] rows through the owned head group and F slice.
InferenceMemory decode_memory(const Shapes& s, const Workload& w, std::int64_t resident_kv,
                              std::int64_t parameters) {
  const std::int64_t ea = w.elem.activation, B = w.batch, h = s.h;
  InferenceMemory m;
  m.parameters = parameters;
  m.kv_cache = resident_kv;
  // The in-place ring all-reduces of [B, h] (embedding, W_O, W_down).
  m.comm_buffers = all_reduce_staging(B * h, s.D, w.elem.comm);
  // x, n, y, rstd, q, k, v, out, kept from the first step to the last (SwiGLU writes over the
  // gate rows, the head reuses n and rstd); the RoPE tables.
  const std::int64_t step = 3 * B * h + B + 2 * B * s.qd + 2 * B * s.kvd;
  m.workspace = (s.rope_positions * s.d + step) * ea;
  m.activations = 2 * B * s.ffn * ea;  // the MLP's gate and up pre-activations
  m.logits = B * s.vocab_rows * w.elem.logits;
  return m;
}

struct InferenceTimes {
  double prefill_compute_s = 0, prefill_exposed_s = 0, decode_compute_s = 0, decode_comm_s = 0;
};

// The engine's schedule, kernel by kernel (infer/engine.cpp), as the dry run charges it
// (docs/dry-run.md): a GEMM or attention call takes max(FLOPs / rate, operand bytes read /
// memory bandwidth) -- the bound only matters for the few rows of decode and the prefill's
// head --, elementwise kernels nothing; a message alpha + bytes / beta.
InferenceTimes inference_times(const Shapes& s, const Workload& w,
                               const Hardware& hw, int degree, double rate,
                               std::int64_t new_tokens) {
  const double D = degree, L = double(s.L), h = double(s.h), d = double(s.d);
  const double B = double(w.batch), S = double(w.seq), R = double(s.block_rows);
  const double qd = double(s.qd), kvd = double(s.kvd), fl = double(s.ffn);
  const double Hl = double(s.heads), Kl = double(s.kv_heads), vr = double(s.vocab_rows);
  const double ea = double(w.elem.activation), ec = double(w.elem.comm);
  const double bw = hw.memory_bw_Bps;
  const auto kernel = [&](double flops, double elements) {
    const double t = flops / rate;
    return bw > 0 ? std::max(t, elements * ea / bw) : t;
  };
  const auto gemm = [&](double M, double K, double N) {
    return kernel(2 * M * N * K, M * K + K * N);
  };
  const Link& link = hw.devices_per_node >= degree ? hw.intra : hw.inter;
  const auto t = [&](double bytes) { return link.alpha_s + bytes / link.beta_Bps; };
  InferenceTimes out;

  // Prefill: the TSP forward, followed call by call on one rank's virtual clock (the ranks
  // taken as symmetric: each rank's position in the broadcast chains is not modelled). Per layer, D head groups (tsp_attention.cpp): begin(k) waits for shard
  // P_k, projects group k, starts its K and V all-gathers (on the axis' stream) and issues the
  // broadcast of P_{k+2} (or, for k >= D-2, of the next layer's P_0, P_1) on the shard stream;
  // group j then runs its local rows' attention, W_O of group j-1, begin(j+1), waits its
  // gathers and runs its remote rows. Then the MLP ring (tsp_mlp.cpp): D shards, each hop
  // posted before the shard's GEMMs and waited after. Streams are independent (the dry run
  // shares no link between them); a message costs alpha + bytes / beta, a chain broadcast
  // (D-1)·alpha + (chunks + D-2) chunks / beta, a ring all-gather D-1 hops.
  const double Sl = S / D;
  double local_pairs = 0, rank_pairs = 0;  // per sequence: own keys only, and all visible
  if (w.contiguous || D == 1) {
    // The last rank (the slowest): positions (D-1)·Sl .. S-1.
    local_pairs = Sl * (Sl + 1) / 2;
    rank_pairs = Sl * (S - Sl) + local_pairs;
  } else {  // zigzag: chunks r and 2D-1-r of c = S/2D tokens; every rank sees S(S+1)/2D pairs
    const double c = S / (2 * D);
    local_pairs = 2 * c * c + c;
    rank_pairs = S * (S + 1) / (2 * D);
  }
  const auto core = [&](double pairs, double keys) {  // one group's attention call
    return kernel(4 * d * Hl * B * pairs, B * d * (Sl * Hl + 2 * keys * Kl));
  };
  const double project = gemm(R, h, qd) + 2 * gemm(R, h, kvd), wo = gemm(R, qd, h);
  const double local = core(local_pairs, Sl);
  const double remote = D > 1 ? core(rank_pairs - local_pairs, (D - 1) * Sl) : 0.0;
  const double shard = 2 * gemm(R, h, fl) + gemm(R, fl, h);  // one MLP shard
  out.prefill_compute_s = L * (D * (project + wo + local + remote + shard)) + gemm(B, h, vr);
  if (D == 1) {
    out.prefill_exposed_s = 0;
  } else {
    const double A = 2 * (qd + kvd) * h * ec, M = 3 * fl * h * ec;
    const double chunk = std::min(A, double(512 << 10));
    const double chunks = std::ceil(A / chunk);
    // A chain broadcast (comm/collectives/broadcast.cpp: the root posts every chunk at once,
    // each rank forwards a chunk as it arrives) reaches the chain's last rank after
    // (D-1) alpha + (chunks + D-2) chunk hops. Broadcasts queued on one stream with rotating
    // roots then complete every alpha + (chunks + 2) chunk hops: the spacing the transport's
    // virtual time shows (D = 8, 33.5 MB: 351 us against 335 us of bytes), not derived here
    // hop by hop.
    const double bc = (D - 1) * link.alpha_s + (chunks + D - 2) * chunk / link.beta_Bps;
    const double bc_every = link.alpha_s + (chunks + 2) * chunk / link.beta_Bps;
    const double gathers = 2 * (D - 1) * t(R * kvd * ec);  // K then V on the axis' stream
    // Before the layers: TspOps' two communicator splits (2(D-1) alpha) and the embedding's
    // three all-to-alls (ids spread evenly over the vocabulary blocks), waited at once.
    const double foreign = std::floor(R * (D - 1) / D);
    double now = 2 * (D - 1) * link.alpha_s + 3 * (D - 1) * link.alpha_s +
                 ((D - 1) * 8 + foreign * 4 + foreign * h * ec) / link.beta_Bps;
    double bfree = now, axis_free = now, ring_free = now;
    std::vector<double> ready(static_cast<std::size_t>(degree) + 2, 0.0), next(2, 0.0);
    const auto broadcast_at = [&](double issue) {
      const double begin = std::max(issue, bfree);
      bfree = begin + bc_every;
      return begin + bc;
    };
    ready[0] = broadcast_at(now);  // layer 0's P_0 and P_1 (first_attention_shards)
    ready[1] = broadcast_at(now);
    std::vector<double> gathered(static_cast<std::size_t>(degree), 0.0);
    const int Di = degree;
    for (std::int64_t l = 0; l < s.L; ++l) {
      const auto begin = [&](int k) {
        now = std::max(now, ready[static_cast<std::size_t>(k)]) + project;
        axis_free = std::max(now, axis_free) + gathers;
        gathered[static_cast<std::size_t>(k)] = axis_free;
        if (k + 2 < Di)
          ready[static_cast<std::size_t>(k + 2)] = broadcast_at(now);
        else
          next[static_cast<std::size_t>(k + 2 - Di)] = broadcast_at(now);
      };
      begin(0);
      for (int j = 0; j < Di; ++j) {
        now += local + (j > 0 ? wo : 0.0);
        if (j + 1 < Di) begin(j + 1);
        now = std::max(now, gathered[static_cast<std::size_t>(j)]) + remote;
      }
      now += wo;
      ready[0] = next[0];
      ready[1] = next[1];
      for (int k = 0; k < Di; ++k) {  // the MLP ring
        double hop = 0;
        if (k + 1 < Di) {
          const double post = std::max(now, ring_free);
          ring_free = post + M / link.beta_Bps;
          hop = post + t(M);
        }
        now = std::max(now + shard, hop);
      }
    }
    // The B last rows' broadcasts (one chunk each: D-1 hops), then the head.
    now += B * (D - 1) * t(h * ec);
    out.prefill_exposed_s = now - (out.prefill_compute_s - gemm(B, h, vr));
  }

  // Decode, one step of B tokens (engine.cpp decode): per layer the owned head group's Q, K, V
  // and W_O GEMMs on B rows, one attention call per sequence over its cache, the F slice's
  // three GEMMs; the head on the owned vocabulary rows. The new_tokens - 1 steps see caches of
  // S + 1 .. S + new_tokens - 1 positions: their mean, S + new_tokens / 2.
  const double kv = S + double(std::max<std::int64_t>(new_tokens, 2)) / 2;
  const double attention = kernel(4 * d * Hl * kv, Hl * d + 2 * kv * Kl * d);
  const double layer = gemm(B, h, qd) + 2 * gemm(B, h, kvd) + B * attention + gemm(B, qd, h) +
                       2 * gemm(B, h, fl) + gemm(B, fl, h);
  out.decode_compute_s = L * layer + gemm(B, h, vr);
  if (D > 1) {
    // Every all-reduce waited at once: 2L + 1 in-place rings of [B, h] (2(D-1) steps of B h / D
    // elements) and the sampling's ring of B (max, index) pairs of 16 bytes.
    const double ring = 2 * (D - 1);
    out.decode_comm_s = (2 * L + 1) * ring * t(B * h / D * ec) + ring * t(16 * std::ceil(B / D));
  }
  return out;
}

}  // namespace

InferenceRow predict_inference(const ModelConfig& m, int degree, const Workload& w,
                               const Hardware& hw, std::int64_t new_tokens) {
  if (new_tokens < 0)
    throw ConfigError(
        fmt::format("new_tokens {} must be >= 0 (the decode steps reserved)", new_tokens));
  parallel::check_inference_degree(m, degree);  // the engine's refusals, in its words
  const Mesh mesh{.tsp = degree};
  Workload fwd = w;
  fwd.recompute = Recompute::None;
  const Shapes s = shapes_of(m, mesh, fwd);
  const Memory train = memory_per_device(m, mesh, fwd);
  const std::int64_t ea = w.elem.activation, ec = w.elem.comm, D = degree;
  const std::int64_t R = s.block_rows, h = s.h, B = w.batch;
  InferenceRow row;
  row.degree = degree;
  // Rank j keeps head group j's K and V of every layer, sequence and position (kv_cache.h):
  // s.kvd = kv_heads_per_rank * d, one whole kv head per replica when D > Hkv.
  const std::int64_t kv = 2 * s.L * B * (w.seq + new_tokens) * s.kvd * ea;
  row.prefill = prefill_memory(s, w, kv, train.parameters);
  row.decode = decode_memory(s, w, kv, train.parameters);
  row.parameters = train.parameters;
  row.kv_cache = kv;
  row.comm_buffers = std::max(row.prefill.comm_buffers, row.decode.comm_buffers);
  row.workspace = std::max(row.prefill.workspace, row.decode.workspace);
  row.activations = std::max(row.prefill.activations, row.decode.activations);
  row.logits = std::max(row.prefill.logits, row.decode.logits);
  row.overhead = hw.runtime_overhead_bytes;
  row.fits = row.total() <= hw.memory_bytes;

  // Bytes sent per rank (comm/collectives: a ring all-gather sends (D-1) blocks, a ring
  // all-reduce 2(D-1)/D of the buffer when its count is a multiple of D).
  const std::int64_t A = 2 * (s.qd + s.kvd) * h * ec, M = 3 * s.ffn * h * ec;
  InferenceTraffic& tr = row.traffic;
  tr.prefill_kv_gathers = s.L * 2 * D * (D - 1) * R * s.kvd * ec;
  tr.prefill_weights = s.L * (D - 1) * (A + M);
  tr.prefill_last_rows_all_ranks = (D - 1) * B * h * ea;
  tr.decode_all_reduce = (2 * s.L + 1) * 2 * (D - 1) * B * h * ec / D;
  tr.decode_argmax = 2 * (D - 1) * B * 16 / D;
  row.prefill_bytes =
      tr.prefill_kv_gathers + tr.prefill_weights + tr.prefill_last_rows_all_ranks / D;
  row.decode_bytes = tr.decode_all_reduce + tr.decode_argmax;

  const double rate = hw.flops_per_s(w.bf16() ? Precision::bf16() : Precision::fp32());
  const InferenceTimes times = inference_times(s, w, hw, degree, rate, new_tokens);
  row.prefill_compute_s = times.prefill_compute_s;
  row.prefill_exposed_s = times.prefill_exposed_s;
  row.prefill_s = times.prefill_compute_s + times.prefill_exposed_s;
  row.decode_compute_s = times.decode_compute_s;
  row.decode_comm_s = times.decode_comm_s;
  row.decode_token_s = times.decode_compute_s + times.decode_comm_s;
  row.decode_tokens_per_s = double(B) / row.decode_token_s;
  return row;
}

}  // namespace origami::plan
