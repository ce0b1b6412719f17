// Which block of each model tensor a rank holds, and the operations driven by it:
// allocation with local shapes, initialisation bit-identical to the single-device tensor's
// slice, and gathering a sharded tensor back into the full tensor.
//
// On a tensor-parallel axis of T ranks (rank t):
//   q/k/v proj, gate/up proj   rows  [t*n/T, (t+1)*n/T)   (column-parallel: output features)
//   o_proj, down_proj          cols  [t*n/T, (t+1)*n/T)   (row-parallel: input features)
//   embed_tokens, lm_head      rows  [t*Vp/T, (t+1)*Vp/T) of the vocabulary padded to Vp;
//                              rows >= V are padding (zero, never updated: their gradient is 0)
//                              (tied embeddings: embed_tokens only, and the head uses its
//                              rows: the same rows on the same rank, so both gradients
//                              meet in the owner's block and reduce as one tensor)
//   RMSNorm weights            replicated (every rank holds the whole vector)
// With more ranks than kv heads (T = Hkv * n), k/v proj hold kv head t / n: each block is held
// by n ranks (`replicas`), whose gradients are partial (their own query heads' share).
// Every tensor is replicated over the other axes (data and sequence parallel).
#pragma once

#include <string>
#include <vector>

#include "origami/comm/communicator.h"
#include "origami/model/weights.h"

namespace origami::parallel {

struct ShardSpec {
  std::string name;
  Shape global;          // the single-device shape
  Shape local;           // this rank's block (vocabulary rows padded)
  Shape offset;          // where the block starts in the global tensor
  int shard_dim = -1;    // -1: replicated on the tensor axis; 0: rows; 1: columns
  int parts = 1;         // ranks sharing the tensor on the tensor axis
  bool is_norm = false;  // RMSNorm weight: replicated, initialised to 1, no weight decay
  // Reduction groups, named by mesh axis (set by assign_reduction_axes in registry.h):
  // the axes over which this gradient is summed after the last micro-batch (replicas of the
  // block that saw different tokens), and the axes whose ranks hold different blocks of the
  // tensor (the gradient norm sums its squares over them; identical replicas count once).
  std::vector<std::string> grad_sum_axes;
  std::vector<std::string> norm_sum_axes;
  // The mesh axis whose ranks hold the blocks (gather_full runs over it): "tp" for the
  // baselines, "tsp" for TSP (its one axis carries both weight and token shards).
  std::string shard_axis = "tp";
  // Ranks of the shard axis holding this same block (k/v proj with more ranks than kv heads;
  // 1 otherwise). Replicas are consecutive ranks; only the first (norm_counted) adds the
  // block's squares to the gradient norm, so that each replicated block counts once.
  int replicas = 1;
  bool norm_counted = true;
  // -1: every rank of the shard axis holds a block (or the whole, replicated). Otherwise the
  // rank of the shard axis holding the whole tensor, the others an empty block (local {0}):
  // TSP's expert schedule, expert e on rank e / (E/D) (own_whole_experts).
  int owner = -1;
  // False on the ranks of the other pipeline stages (pipeline_stages.h): they hold the tensor
  // as an empty block (local {0}) and reduce, clip and step nothing of it.
  bool on_stage = true;
};

// Specs in the order of named_tensors() for tensor-parallel degree `tp`, rank `tp_rank`.
// Throws ConfigError for a degree check_tensor_split refuses (layout.h).
std::vector<ShardSpec> make_shard_specs(const ModelConfig& config, int tp, int tp_rank);

// Allocates tensors with the specs' local shapes (zeroed), in named_tensors() order, of `dtype`.
ModelTensors allocate_sharded(const ModelConfig& config, const std::vector<ShardSpec>& specs,
                              MemoryTracker& tracker, MemCategory category,
                              DType dtype = DType::F32);

// Initialises each block exactly as the same slice of the single-device initialisation
// (initialize_parameters): same seed, same names, global indices; padding rows stay zero.
void initialize_sharded(ModelTensors& params, const std::vector<ShardSpec>& specs,
                        const ModelConfig& config, std::uint64_t seed);

// Collective over the tensor axis `tp` (size spec.parts, or any size for a replicated
// tensor): every rank receives the full [global] tensor, allocated on `tracker` as Workspace.
// A block held by several replicas is taken from the first of them; a tensor held whole by
// one rank (ShardSpec::owner) is broadcast from it.
Tensor gather_full(const ShardSpec& spec, const Tensor& local, comm::Communicator& tp,
                   MemoryTracker& tracker);

}  // namespace origami::parallel
