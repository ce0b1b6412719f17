// The messages of schedule.h, block by block as mesh_ops.cpp and attention_cp.cpp issue them.
#include "origami/parallel/strategies/mesh/schedule.h"

#include <algorithm>

#include "origami/comm/collectives/bytes_sent.h"

namespace origami::parallel {

namespace {
// Per-rank bytes of the ring collectives, stated in comm/collectives/bytes_sent.h.
using comm::ring_all_reduce_sent;
}  // namespace

std::vector<MeshTraffic> mesh_traffic(const MeshRankShapes& s, std::int64_t e,
                                      bool full_recompute, int tp_rank) {
  std::vector<MeshTraffic> out;
  const std::int64_t L = s.L, R = s.rows, rerun = full_recompute ? L : 0;
  const auto add = [&](const char* block, const char* comm, const char* op, bool forward,
                       bool in_layers, std::int64_t calls, std::int64_t bytes_per_call) {
    if (calls > 0)
      out.push_back({block, comm, op, forward, in_layers, calls, calls * bytes_per_call});
  };
  constexpr bool kFwd = true, kBwd = false, kLayer = true, kModel = false;
  const char* tp = kMeshTensorAxis;
  const int T = s.T;
  if (T > 1) {
    // The head's softmax statistics: (max, sum-exp) of every row gathered, the target logit
    // (on one rank, 0 elsewhere) summed.
    const std::int64_t pairs = comm::ring_blocks_sent(2 * R * e, T),
                       target = ring_all_reduce_sent(R, T, tp_rank, e);
    if (s.split_stream()) {
      // Exits reduce-scatter a [R, h] partial to the stream's [R/T, h]; entries all-gather the
      // stream's rows: forward once, backward for dY and again for the block input. Full
      // recompute re-runs each layer's forward pass.
      // An equal block of the stream each: rs and ag send the same bytes.
      const std::int64_t block = R * s.h / T * e;
      const std::int64_t rs = comm::ring_blocks_sent(block, T),
                         ag = comm::ring_blocks_sent(block, T);
      add("embedding", tp, "reduce_scatter", kFwd, kModel, 1, rs);
      add("attention", tp, "reduce_scatter", kFwd, kLayer, L, rs);
      add("mlp", tp, "reduce_scatter", kFwd, kLayer, L, rs);
      add("attention", tp, "reduce_scatter", kBwd, kLayer, rerun + L, rs);  // re-run exit, dN
      add("mlp", tp, "reduce_scatter", kBwd, kLayer, rerun + L, rs);
      add("head", tp, "reduce_scatter", kBwd, kModel, 1, rs);  // dX of the head input
      add("attention", tp, "all_gather", kFwd, kLayer, L, ag);
      add("mlp", tp, "all_gather", kFwd, kLayer, L, ag);
      add("attention", tp, "all_gather", kBwd, kLayer, rerun + 2 * L, ag);  // dY, rows again
      add("mlp", tp, "all_gather", kBwd, kLayer, rerun + 2 * L, ag);
      add("head", tp, "all_gather", kFwd, kModel, 1, ag);  // the head input
      add("head", tp, "all_gather", kFwd, kModel, 1, pairs);
      add("embedding", tp, "all_gather", kBwd, kModel, 1, ag);  // dX
      add("head", tp, "all_reduce", kFwd, kModel, 1, target);
    } else {
      // Every exit's partial all-reduced forward, every entry's dN backward, the head's dX.
      const std::int64_t ar = ring_all_reduce_sent(R * s.h, T, tp_rank, e);
      add("embedding", tp, "all_reduce", kFwd, kModel, 1, ar);
      add("attention", tp, "all_reduce", kFwd, kLayer, L, ar);
      add("mlp", tp, "all_reduce", kFwd, kLayer, L, ar);
      add("attention", tp, "all_reduce", kBwd, kLayer, rerun + L, ar);  // re-run exit, dN
      add("mlp", tp, "all_reduce", kBwd, kLayer, rerun + L, ar);
      add("head", tp, "all_reduce", kBwd, kModel, 1, ar);
      add("head", tp, "all_reduce", kFwd, kModel, 1, target);
      add("head", tp, "all_gather", kFwd, kModel, 1, pairs);
    }
  }
  if (s.S > 1) {
    // K and V (this rank's [R, kvd] blocks) gathered in each layer forward and again in
    // backward; dK, dV reduce-scattered (attention_cp.cpp).
    const std::int64_t kv = comm::ring_blocks_sent(R * s.kvd * e, s.S);
    add("attention", kMeshSequenceAxis, "all_gather", kFwd, kLayer, 2 * L, kv);
    add("attention", kMeshSequenceAxis, "all_gather", kBwd, kLayer, 2 * rerun + 2 * L, kv);
    add("attention", kMeshSequenceAxis, "reduce_scatter", kBwd, kLayer, 2 * L, kv);
  }
  return out;
}

std::int64_t MeshResident::peak_bytes() const {
  return std::max({attention_forward, attention_backward, mlp_forward, mlp_backward,
                   head_forward, head_backward});
}

MeshResident mesh_resident_set(const MeshRankShapes& s, std::int64_t e,
                               const MeshSharedBuffers& shared) {
  const std::int64_t G = mesh_gathered_rows_floats(s) * e;
  // A block's exit: TP-SP's reduce-scatter target [R/T, h] and its staging; TP's all-reduce
  // staging (in place on the partial); nothing without tp.
  const std::int64_t exit = s.split_stream() ? s.stream_rows() * s.h * e + shared.exit_staging
                            : s.T > 1        ? shared.exit_staging
                                             : 0;
  MeshResident r;
  // The gathered input lives through the block; its exit follows once the input is freed.
  r.attention_forward = std::max(G + shared.cp_forward, exit);
  r.mlp_forward = std::max(G, exit);
  r.head_backward = std::max(G, exit);  // the head input kept from forward; the dX exit
  r.head_forward = G + mesh_head_stats_floats(s) * e + (s.T > 1 ? shared.target_staging : 0);
  // dY and the re-gathered input held together, beside SP's backward or the dN exit.
  r.attention_backward = 2 * G + std::max(shared.cp_backward, exit);
  r.mlp_backward = 2 * G + exit;
  return r;
}

}  // namespace origami::parallel
