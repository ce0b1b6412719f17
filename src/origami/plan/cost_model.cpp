#include "origami/plan/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "origami/core/error.h"

namespace origami::plan {

std::string Mesh::strategy() const {
  if (tp > 1 && sp > 1) return "tp+sp";
  if (tp > 1) return "tp";
  if (sp > 1) return "sp";
  if (dp > 1) return "dp";
  return "single";
}

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::None;
  if (name == "mlp") return Recompute::Mlp;
  if (name == "full") return Recompute::Full;
  throw ConfigError(fmt::format("unknown recompute policy '{}'; use none, mlp or full", name));
}

std::string recompute_name(Recompute r) {
  switch (r) {
    case Recompute::None:
      return "none";
    case Recompute::Mlp:
      return "mlp";
    case Recompute::Full:
      return "full";
  }
  return "?";
}

void check_layout(const ModelConfig& m, const Mesh& mesh, const Workload& w) {
  if (mesh.dp < 1 || mesh.tp < 1 || mesh.sp < 1)
    throw ConfigError(fmt::format("mesh degrees must be >= 1 (dp={}, tp={}, sp={})", mesh.dp,
                                  mesh.tp, mesh.sp));
  if (w.batch < 1 || w.seq < 1)
    throw ConfigError(fmt::format("batch and sequence must be >= 1 (got {} and {})", w.batch,
                                  w.seq));
  const int T = mesh.tp;
  if (m.num_attention_heads % T != 0 || m.num_key_value_heads % T != 0 ||
      m.intermediate_size % T != 0)
    throw ConfigError(fmt::format(
        "tp={} must divide the attention heads ({}), kv heads ({}) and MLP width ({})", T,
        m.num_attention_heads, m.num_key_value_heads, m.intermediate_size));
  if (w.batch % mesh.dp != 0)
    throw ConfigError(fmt::format("dp={} must divide the micro-batch ({})", mesh.dp, w.batch));
  if (mesh.sp > 1 && w.seq % (2 * mesh.sp) != 0)
    throw ConfigError(fmt::format("sp={} needs the sequence ({}) to be a multiple of 2*sp "
                                  "(zigzag layout)",
                                  mesh.sp, w.seq));
  const std::int64_t rows = w.batch / mesh.dp * (w.seq / mesh.sp);
  if (mesh.sequence_parallel && T > 1 && rows % T != 0)
    throw ConfigError(fmt::format("TP-SP needs the rank's {} rows to split over tp={}", rows, T));
}

namespace {

// The shapes one rank works on (docs/planner.md, "Per-rank shapes").
struct Shapes {
  std::int64_t h, d, L, heads, kv_heads, ffn, vocab_rows;  // heads/kv/ffn/vocab: this rank's
  std::int64_t block_rows;   // B/dp · S/sp: the rows a block computes on
  std::int64_t stream_rows;  // the residual stream's rows (block_rows / tp under TP-SP)
};

Shapes shapes_of(const ModelConfig& m, const Mesh& mesh, const Workload& w) {
  check_layout(m, mesh, w);
  const int T = mesh.tp;
  Shapes s{};
  s.h = m.hidden_size;
  s.d = m.head_dim();
  s.L = m.num_hidden_layers;
  s.heads = m.num_attention_heads / T;
  s.kv_heads = m.num_key_value_heads / T;
  s.ffn = m.intermediate_size / T;
  s.vocab_rows = (m.vocab_size + T - 1) / T;  // V padded to a multiple of tp, split
  s.block_rows = w.batch / mesh.dp * (w.seq / mesh.sp);
  s.stream_rows = mesh.sequence_parallel && T > 1 ? s.block_rows / T : s.block_rows;
  return s;
}

// Elements of each gradient tensor this rank holds, and whether it is an RMSNorm weight.
std::vector<std::pair<std::int64_t, bool>> rank_tensors(const Shapes& s) {
  std::vector<std::pair<std::int64_t, bool>> t;
  t.emplace_back(s.vocab_rows * s.h, false);  // embedding
  for (std::int64_t l = 0; l < s.L; ++l) {
    t.emplace_back(s.h, true);                          // input norm
    t.emplace_back(s.heads * s.d * s.h, false);         // wq
    t.emplace_back(s.kv_heads * s.d * s.h, false);      // wk
    t.emplace_back(s.kv_heads * s.d * s.h, false);      // wv
    t.emplace_back(s.h * s.heads * s.d, false);         // wo
    t.emplace_back(s.h, true);                          // post-attention norm
    for (int k = 0; k < 3; ++k) t.emplace_back(s.ffn * s.h, false);  // gate, up, down
  }
  t.emplace_back(s.h, true);                   // final norm
  t.emplace_back(s.vocab_rows * s.h, false);   // LM head
  return t;
}

}  // namespace

Memory memory_per_device(const ModelConfig& m, const Mesh& mesh, const Workload& w) {
  const Shapes s = shapes_of(m, mesh, w);
  std::int64_t elems = 0;
  for (const auto& [n, norm] : rank_tensors(s)) elems += n;
  Memory mem;
  mem.parameters = elems * w.elem.param;
  mem.gradients = elems * w.elem.grad;
  mem.optimizer = 2 * elems * w.elem.optimizer;  // AdamW's two moments

  // What one layer saves (driver.h): input and post-attention residual [Rs, h], two rstd [Rs];
  // attention q, out [Rb, H/T·d], k, v [Rb, Kv/T·d], lse [Rb·H/T]; MLP gate/up [Rb, f/T].
  const std::int64_t Rs = s.stream_rows, Rb = s.block_rows;
  const std::int64_t stream = 2 * Rs * s.h + 2 * Rs;
  const std::int64_t attention = Rb * (2 * s.heads * s.d + 2 * s.kv_heads * s.d + s.heads);
  const std::int64_t mlp = 2 * Rb * s.ffn;
  const std::int64_t final_rstd = Rs;
  std::int64_t act = 0;
  switch (w.recompute) {
    case Recompute::None:  // everything of every layer, then the final norm's rstd
      act = s.L * (stream + attention + mlp) + final_rstd;
      break;
    case Recompute::Mlp:  // the last layer's gate/up live until its forward ends
      act = s.L * (stream + attention) + std::max(mlp, final_rstd);
      break;
    case Recompute::Full:  // every layer's input; the last layer re-run saving everything
      act = s.L * Rs * s.h + final_rstd + (stream + attention + mlp);
      break;
  }
  mem.activations = act * w.elem.activation;
  mem.logits = Rb * s.vocab_rows * w.elem.activation;
  return mem;
}

std::int64_t all_gather_sent(std::int64_t block_count, int n, std::int64_t elem) {
  return static_cast<std::int64_t>(n - 1) * block_count * elem;  // T - c_{r+1}, equal blocks
}

std::int64_t reduce_scatter_sent(std::int64_t block_count, int n, std::int64_t elem) {
  return static_cast<std::int64_t>(n - 1) * block_count * elem;  // T - c_r, equal blocks
}

std::int64_t all_reduce_sent(std::int64_t count, int n, int r, std::int64_t elem) {
  if (n <= 1) return 0;
  // Blocks balanced_counts(count, n): the first count % n blocks hold one more element.
  const auto block = [&](int i) { return count / n + (i < count % n ? 1 : 0); };
  return ((count - block(r)) + (count - block((r + 1) % n))) * elem;
}

namespace {

// Accumulates (axis, op) -> calls, bytes in a stable order.
class Ledger {
 public:
  void add(const std::string& axis, const std::string& op, std::int64_t calls,
           std::int64_t bytes) {
    if (calls == 0) return;
    auto [it, fresh] = index_.try_emplace(axis + "/" + op, ops_.size());
    if (fresh) ops_.push_back({axis, op, 0, 0});
    ops_[it->second].calls += calls;
    ops_[it->second].bytes_sent += bytes;
  }
  std::vector<CommOp> take() { return std::move(ops_); }

 private:
  std::map<std::string, std::size_t> index_;
  std::vector<CommOp> ops_;
};

}  // namespace

std::vector<CommOp> comm_per_micro_batch(const ModelConfig& m, const Mesh& mesh,
                                         const Workload& w, int axis_rank) {
  const Shapes s = shapes_of(m, mesh, w);
  const std::int64_t e = w.elem.comm, L = s.L, Rb = s.block_rows;
  // Full recompute re-runs each layer's forward (its collectives included) in backward.
  const std::int64_t layer_forwards = w.recompute == Recompute::Full ? 2 * L : L;
  Ledger out;
  const int T = mesh.tp;
  if (T > 1) {
    const std::int64_t N = Rb * s.h;  // one [Rb, h] partial
    if (mesh.sequence_parallel) {
      // Exits (embedding, attention, MLP forward; dN of attention, MLP and the head backward)
      // reduce-scatter to [Rb/T, h]; entries all-gather the normed rows (forward, and the
      // block input again in backward), dY in backward, the head input and the embedding dX.
      out.add("tp", "reduce_scatter", 1 + 2 * layer_forwards + 2 * L + 1,
              (1 + 2 * layer_forwards + 2 * L + 1) * reduce_scatter_sent(N / T, T, e));
      const std::int64_t gathers = 2 * layer_forwards + 4 * L + 2;
      out.add("tp", "all_gather", gathers + 1,
              gathers * all_gather_sent(N / T, T, e) + all_gather_sent(2 * Rb, T, e));
      out.add("tp", "all_reduce", 1, all_reduce_sent(Rb, T, axis_rank, e));  // target logits
    } else {
      // Every exit all-reduced forward, every dN backward, the head's dX; the target logits.
      const std::int64_t reduces = 1 + 2 * layer_forwards + 2 * L + 1;
      out.add("tp", "all_reduce", reduces + 1,
              reduces * all_reduce_sent(N, T, axis_rank, e) + all_reduce_sent(Rb, T, axis_rank, e));
      out.add("tp", "all_gather", 1, all_gather_sent(2 * Rb, T, e));  // (max, sum-exp) pairs
    }
  }
  const int S = mesh.sp;
  if (S > 1) {
    const std::int64_t kv = Rb * s.kv_heads * s.d;  // this rank's K (or V) block
    // K and V gathered in each layer forward and again in backward; dK, dV reduce-scattered.
    out.add("sp", "all_gather", 2 * layer_forwards + 2 * L,
            (2 * layer_forwards + 2 * L) * all_gather_sent(kv, S, e));
    out.add("sp", "reduce_scatter", 2 * L, 2 * L * reduce_scatter_sent(kv, S, e));
  }
  return out.take();
}

std::vector<CommOp> comm_gradient_reduction(const ModelConfig& m, const Mesh& mesh,
                                            const ElementSizes& elem, int axis_rank) {
  Workload w;
  w.batch = mesh.dp;
  w.seq = 2 * mesh.sp * mesh.tp;  // shapes of the weights only: any valid workload
  const Shapes s = shapes_of(m, mesh, w);
  Ledger out;
  for (const auto& [n, norm] : rank_tensors(s)) {
    if (mesh.sp > 1) out.add("sp", "all_reduce", 1, all_reduce_sent(n, mesh.sp, axis_rank, elem.grad));
    if (mesh.dp > 1) out.add("dp", "all_reduce", 1, all_reduce_sent(n, mesh.dp, axis_rank, elem.grad));
    if (norm && mesh.sequence_parallel && mesh.tp > 1)
      out.add("tp", "all_reduce", 1, all_reduce_sent(n, mesh.tp, axis_rank, elem.grad));
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
