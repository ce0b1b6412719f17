#include "origami/plan/inference.h"

#include <algorithm>

#include <fmt/format.h>

#include "origami/core/error.h"
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
    const std::int64_t A = 2 * (s.qd + s.kvd) * h * ec, M = 3 * s.ffn * h * ec;
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
  const std::int64_t attention = stream + (D > 1 ? 2 * h * s.qd + R * (s.qd + s.heads) : h * s.qd);
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
  // x, n, y, rstd, q, k, v, out, lse for the whole step, plus the MLP's gated rows or the
  // head's final-norm output and rstd; the RoPE tables.
  const std::int64_t step = 3 * B * h + B + 2 * B * s.qd + 2 * B * s.kvd + s.heads;
  m.workspace = (s.rope_positions * s.d + step + std::max(B * s.ffn, B * h + B)) * ea;
  m.activations = 2 * B * s.ffn * ea;  // the MLP's gate and up pre-activations
  m.logits = B * s.vocab_rows * w.elem.logits;
  return m;
}

}  // namespace

InferenceRow predict_inference(const ModelConfig& m, int degree, const Workload& w,
                               const Hardware& hw, std::int64_t new_tokens) {
  if (new_tokens < 0)
    throw ConfigError(
        fmt::format("new_tokens {} must be >= 0 (the decode steps reserved)", new_tokens));
  const Mesh mesh{1, 1, 1, false, degree};
  Workload fwd = w;
  fwd.recompute = Recompute::None;
  const Shapes s = shapes_of(m, mesh, fwd);
  const Memory train = memory_per_device(m, mesh, fwd);
  const std::int64_t ea = w.elem.activation, ec = w.elem.comm, D = degree;
  const std::int64_t R = s.block_rows, h = s.h, B = w.batch;
  InferenceRow row;
  row.degree = degree;
  // Rank j keeps head group j's K and V of every layer, sequence and position (kv_cache.h).
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
  const double H = double(m.num_attention_heads), d = double(m.head_dim());
  const double Hkv = double(m.num_key_value_heads), f = double(m.intermediate_size);
  const double L = double(s.L), V = double(m.vocab_size), hd = double(h);
  const double P = L * (2 * hd * H * d + 2 * hd * Hkv * d + 3 * hd * f) + hd * V;
  const double S = double(w.seq), Bd = double(B);
  const Link& link = hw.devices_per_node >= degree ? hw.intra : hw.inter;
  const auto t = [&](double bytes) { return link.alpha_s + bytes / link.beta_Bps; };

  // Prefill: the training forward's FLOPs (the head on the last rows only); exposed as in
  // training (the shard broadcasts after shard 0 and the MLP ring hops overlapped, K/V gathers
  // not).
  const double prefill_flops =
      (2 * (P - hd * V) * Bd * S + 2 * hd * V * Bd + 4 * d * H * Bd * S * (S + 1) / 2 * L) /
      double(D);
  const double kv_gather = double(D - 1) * double(R * s.kvd * ec);
  const double exposed =
      D > 1 ? L * (t(double(A)) +
                   2 * double(D) * (link.alpha_s * double(D - 1) + kv_gather / link.beta_Bps))
            : 0;
  row.prefill_s = prefill_flops / rate + exposed;

  // Decode, one token for each of the B sequences: weights and the cache are read once
  // (memory-bound) or the FLOPs dominate; 2L + 1 all-reduces of [B, h] and one of B (max,
  // index) pairs of 16 bytes.
  const double decode_flops = Bd * (2 * P + 4 * d * H * S * L) / double(D);
  const double read_bytes = double(row.parameters + row.kv_cache);
  const double compute = std::max(decode_flops / rate, read_bytes / hw.memory_bw_Bps);
  double comm = 0;
  if (D > 1) {
    const double ar = Bd * hd * double(ec);
    const double ring = 2.0 * double(D - 1) / double(D);
    comm = (2 * L + 1) * (2 * double(D - 1) * link.alpha_s + ring * ar / link.beta_Bps) +
           (2 * double(D - 1) * link.alpha_s + ring * 16 * Bd / link.beta_Bps);
  }
  row.decode_token_s = compute + comm;
  row.decode_tokens_per_s = Bd / row.decode_token_s;
  return row;
}

}  // namespace origami::plan
