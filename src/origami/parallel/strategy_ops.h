// What a parallel strategy plugs into RankModel: its blocks (BlockOps, driven by the shared
// model driver) fed one local micro-batch at a time, and the specs of the shards it holds.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "origami/model/block_ops.h"
#include "origami/model/moe.h"
#include "origami/parallel/layout.h"
#include "origami/parallel/parallel_config.h"
#include "origami/parallel/shard_spec.h"

namespace origami::parallel {

// One micro-batch as this rank sees it: B sequences of its Sl positions (layout order).
struct LocalBatch {
  std::int64_t batch = 1;
  std::vector<std::int32_t> ids, labels;  // [B, Sl]
  // Packed documents (TokenBatch), [B, Sl] each; empty: unbroken rows.
  std::vector<std::int32_t> documents = {};
  std::vector<std::int64_t> positions = {};
  // The whole rows' document ids [B, S]: the keys a rank gathers from the others get theirs
  // from their global positions (no ids travel with K/V).
  std::vector<std::int32_t> row_documents = {};
  // The balanced layout's positions for this micro-batch (layout.h): this rank's rows' global
  // positions [Sl], and every rank's of the token axis in rank order [S] (the keys of a
  // gathered K/V). Empty: the rank's fixed layout.
  std::vector<std::int64_t> token_positions = {}, kv_positions = {};
};

// The documents of a rank's rows for AttentionDims, and the whole rows' ids for a
// SequenceAxis (null for unbroken rows).
inline RowDocuments local_documents(const LocalBatch& b) {
  if (b.documents.empty()) return {};
  return {b.documents.data(), b.positions.data()};
}
inline const std::int32_t* row_documents(const LocalBatch& b) {
  return b.row_documents.empty() ? nullptr : b.row_documents.data();
}

class StrategyOps : public BlockOps {
 public:
  // The micro-batch the next driver run works on (nullptr between runs); the caller keeps it
  // alive until then.
  virtual void set_batch(const LocalBatch* batch) = 0;
  // Training under --precision bf16 (core/precision.h): the bf16 compute copy of the
  // parameters' matrices that the linears read from now on (nullptr: the fp32 parameters).
  // Only the mesh strategy's blocks read it; RankModel refuses the others before any work.
  virtual void set_compute_weights(const ModelTensors* compute) = 0;
  // Mixture of experts (docs/moe.md): this micro-batch's share of the step's auxiliary loss
  // (1 / micro-batches), and the last forward's auxiliary loss, the same number on every rank
  // (its counts reduced over the job's micro-batch), and its expert load over the layers and
  // the job's micro-batch (the same on every rank). A strategy without experts keeps these.
  virtual void set_aux_weight(double /*weight*/) {}
  // The driver's key of the pass that the next forward or backward runs (a pipeline stage's
  // micro-batch i through chunk c: c * m + i; 0 without stages): what a strategy keeps from a
  // forward for its backward beyond the driver's saved state (the balance's counts) is kept
  // per pass, as several are in flight under 1F1B.
  virtual void set_pass(int /*id*/) {}
  virtual double router_aux_loss() const { return 0.0; }
  virtual MoeLoad moe_load() const { return {}; }
};

// A strategy for RankModel: the rank's shard specs (in named_tensors() order, with their
// reduction axes set) and a factory for its blocks over the allocated shards.
struct Strategy {
  std::vector<ShardSpec> specs;
  std::function<std::unique_ptr<StrategyOps>(const ModelConfig& config, ParallelGroups& groups,
                                             const TokenLayout& layout, ModelTensors& params,
                                             ModelTensors& grads, MemoryTracker& tracker)>
      make_ops;
};

}  // namespace origami::parallel
