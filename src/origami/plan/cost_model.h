// The planner's closed-form cost model of the baseline strategies (single, DP, TP, TP-SP, SP,
// TP+SP, each optionally under DP): per-device memory by category, bytes each rank sends per
// collective, and model FLOPs. Derived from what the engine saves and issues (docs/planner.md
// has the formulas and where each comes from) but independent of the engine's code: it only
// needs the model's shape, so it answers for configurations no machine here could run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "origami/model/config.h"

namespace origami::plan {

// A point of the baselines' mesh: dp x sp x tp ranks; `sequence_parallel` = TP-SP regions
// (only meaningful with tp > 1).
struct Mesh {
  int dp = 1, tp = 1, sp = 1;
  bool sequence_parallel = false;
  int world() const { return dp * tp * sp; }
  std::string strategy() const;  // "single", "dp", "tp", "sp", "tp+sp" (TP-SP is "tp")
};

enum class Recompute { None, Mlp, Full };
Recompute parse_recompute(const std::string& name);  // none | mlp | full (ConfigError else)
std::string recompute_name(Recompute r);

// Bytes per element of each kind of tensor (fp32 everywhere in the engine today).
struct ElementSizes {
  std::int64_t param = 4, grad = 4, optimizer = 4, activation = 4, comm = 4;
};

struct Workload {
  std::int64_t batch = 1;  // global micro-batch (sequences), split over dp
  std::int64_t seq = 1;    // tokens per sequence, split over sp
  Recompute recompute = Recompute::None;
  ElementSizes elem;
};

// Refuses (ConfigError saying what to change) a mesh the engine would refuse: degrees < 1,
// tp not dividing heads, kv heads or the MLP width, batch % dp, zigzag's S % 2sp, TP-SP's
// rows % tp.
void check_layout(const ModelConfig& m, const Mesh& mesh, const Workload& w);

// Per-device peak bytes by category. Parameters, gradients, optimizer state (AdamW: two
// moments) are resident; activations is the peak of the saved tensors during one
// forward+backward under the recompute policy; logits the head's [rows, V_pad/tp] block.
// Communication buffers and workspace are not modelled yet (docs/planner.md).
struct Memory {
  std::int64_t parameters = 0, gradients = 0, optimizer = 0, activations = 0, logits = 0;
  std::int64_t total() const { return parameters + gradients + optimizer + activations + logits; }
};
Memory memory_per_device(const ModelConfig& m, const Mesh& mesh, const Workload& w);

// One kind of collective on one mesh axis: calls and bytes the given rank sends.
struct CommOp {
  std::string axis;  // "tp", "sp", "dp"
  std::string op;    // "all_reduce", "all_gather", "reduce_scatter"
  std::int64_t calls = 0;
  std::int64_t bytes_sent = 0;
};
// One micro-batch's forward+backward (the blocks' collectives; the step's gradient
// reductions are separate), for the rank at `axis_rank` of each axis (bytes differ between
// ranks only when a buffer does not split evenly). Ops with zero calls are omitted.
std::vector<CommOp> comm_per_micro_batch(const ModelConfig& m, const Mesh& mesh,
                                         const Workload& w, int axis_rank = 0);
// The step's weight-gradient all-reduces (once per optimizer step, every tensor over sp then
// dp, and the RMSNorm weights over tp under TP-SP).
std::vector<CommOp> comm_gradient_reduction(const ModelConfig& m, const Mesh& mesh,
                                            const ElementSizes& elem, int axis_rank = 0);

// Model FLOPs of one forward+backward of `batch` sequences of `seq` tokens (docs/flops.md:
// 6·P·T + 3.5·4·d·H·B·S(S+1)/2·L), the whole job's, not per device.
double training_flops(const ModelConfig& m, std::int64_t batch, std::int64_t seq);

// Bytes sent by rank r of an n-rank ring collective (docs/comm.md), counts in elements.
std::int64_t all_gather_sent(std::int64_t block_count, int n, std::int64_t elem);
std::int64_t reduce_scatter_sent(std::int64_t block_count, int n, std::int64_t elem);
std::int64_t all_reduce_sent(std::int64_t count, int n, int r, std::int64_t elem);

}  // namespace origami::plan
