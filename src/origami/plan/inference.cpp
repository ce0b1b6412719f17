#include "origami/plan/inference.h"

#include <algorithm>

#include "origami/plan/buffers.h"
#include "origami/plan/shapes.h"

namespace origami::plan {

InferenceRow predict_inference(const ModelConfig& m, int degree, const Workload& w,
                               const Hardware& hw) {
  const Mesh mesh{1, 1, 1, false, degree};
  Workload fwd = w;
  fwd.recompute = Recompute::None;
  const Shapes s = shapes_of(m, mesh, fwd);
  const Memory train = memory_per_device(m, mesh, fwd);
  const std::int64_t ea = w.elem.activation, ec = w.elem.comm, D = degree;
  const std::int64_t R = s.block_rows, h = s.h;
  InferenceRow row;
  row.degree = degree;
  row.parameters = train.parameters;
  // Rank j keeps head group j's K and V of every token of every layer (DESIGN §6).
  row.kv_cache = 2 * s.L * w.batch * w.seq * s.kvd * ea;
  const TspResident res = tsp_resident_set(s, Recompute::None, ec);
  row.comm_buffers =
      std::max({res.attention_forward, res.mlp_forward, res.head_forward, res.embedding});
  // The forward's peak (driver.cpp): x, n and the MLP's gated rows, or (D > 1) the attention's
  // two W_O copies and remote rows' partial output and lse (buffers.cpp); the RoPE tables.
  const std::int64_t attention = 2 * R * h + (D > 1 ? 2 * h * s.qd + R * (s.qd + s.heads) : 0);
  row.workspace = (s.rope_positions * s.d + std::max(attention, 2 * R * h + R * s.ffn)) * ea;
  row.logits = R * s.vocab_rows * w.elem.logits;
  row.overhead = hw.runtime_overhead_bytes;
  row.fits = row.total() <= hw.memory_bytes;

  const double rate = hw.flops_per_s(w.bf16() ? Precision::bf16() : Precision::fp32());
  const double H = double(m.num_attention_heads), d = double(m.head_dim());
  const double Hkv = double(m.num_key_value_heads), f = double(m.intermediate_size);
  const double L = double(s.L), V = double(m.vocab_size), hd = double(h);
  const double P = L * (2 * hd * H * d + 2 * hd * Hkv * d + 3 * hd * f) + hd * V;
  const double S = double(w.seq), B = double(w.batch);
  const Link& link = hw.devices_per_node >= degree ? hw.intra : hw.inter;
  const auto t = [&](double bytes) { return link.alpha_s + bytes / link.beta_Bps; };

  // Prefill: the training forward's FLOPs and communication; exposed as in training (the
  // shard broadcasts after shard 0 and the MLP/head ring hops overlapped, K/V gathers not).
  const double prefill_flops = (2 * P * B * S + 4 * d * H * B * S * (S + 1) / 2 * L) / double(D);
  const double A = 2.0 * double(s.qd + s.kvd) * hd * double(ec);
  const double kv_gather = double(D - 1) * double(R * s.kvd * ec);
  row.prefill_bytes = static_cast<std::int64_t>(
      L * (double(D - 1) * A + 2 * double(D) * kv_gather +
           double(D - 1) * 3 * double(s.ffn) * hd * double(ec)) +
      double(D - 1) * double(s.vocab_rows) * hd * double(ec));
  const double exposed = D > 1 ? L * (t(A) + 2 * double(D) * (link.alpha_s * double(D - 1) +
                                                               kv_gather / link.beta_Bps))
                               : 0;
  row.prefill_s = prefill_flops / rate + exposed;

  // Decode, one token for each of the B sequences: weights and the cache are read once
  // (memory-bound) or the FLOPs dominate; 2L + 1 all-reduces of [B, h] and one of B (max,
  // index) pairs of 16 bytes.
  const double decode_flops = B * (2 * P + 4 * d * H * S * L) / double(D);
  const double read_bytes = double(row.parameters + row.kv_cache);
  const double compute = std::max(decode_flops / rate, read_bytes / hw.memory_bw_Bps);
  double comm = 0;
  if (D > 1) {
    const double ar = B * hd * double(ec);
    const double ring = 2.0 * double(D - 1) / double(D);
    comm = (2 * L + 1) * (2 * double(D - 1) * link.alpha_s + ring * ar / link.beta_Bps) +
           (2 * double(D - 1) * link.alpha_s + ring * 16 * B / link.beta_Bps);
    row.decode_bytes = static_cast<std::int64_t>((2 * L + 1) * ring * ar + ring * 16 * B);
  }
  row.decode_token_s = compute + comm;
  row.decode_tokens_per_s = B / row.decode_token_s;
  return row;
}

}  // namespace origami::plan
