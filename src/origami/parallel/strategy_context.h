// What the blocks of every strategy start from (MeshOps, TspOps): the model, the rank's groups,
// its token layout, its parameter and gradient shards, its tracker, the RoPE tables, every
// rank's positions along the sequence axis in rank order (the keys of a gathered K/V) and the
// micro-batch being run. A base so that the strategies share one constructor and one batch
// check instead of copies of them.
#pragma once

#include <cstdint>
#include <vector>

#include "origami/parallel/parallel_config.h"
#include "origami/parallel/strategy_ops.h"

namespace origami::parallel {

// A matrix as the linear kernels take it (fp32 or bf16).
inline kernels::WeightView weight_view(const Tensor& t) { return {t.raw(), t.dtype()}; }

class StrategyContext : public StrategyOps {
 protected:
  StrategyContext(const ModelConfig& config, ParallelGroups& groups, const TokenLayout& layout,
                  ModelTensors& params, ModelTensors& grads, MemoryTracker& tracker);

  // Refuses a batch whose ids and labels are not batch x local_seq (nullptr: between
  // micro-batches, always accepted).
  void check_batch_shape(const LocalBatch* batch) const;

 public:
  void set_compute_weights(const ModelTensors* compute) override { compute_ = compute; }
  // Saved activations and K/V (block_ops.h): bf16 with the compute copy (training under
  // --precision bf16), else fp32 (the bf16 inference keeps fp32 K/V here).
  DType activation_dtype() const override {
    return compute_ != nullptr ? DType::BF16 : DType::F32;
  }

 protected:
  // The tensors the linears read: the bf16 compute copy where set (its norms are undefined:
  // norms read params_), else the fp32 parameters.
  const ModelTensors& matrices() const { return compute_ != nullptr ? *compute_ : params_; }
  std::int64_t rows_of(const LocalBatch& b) const { return b.batch * layout_.local_seq(); }
  // The global positions of this rank's rows and of every rank's (rank order) for the batch
  // being run: its own under the balanced layout, else the fixed layout's.
  const std::int64_t* query_positions() const;
  const std::vector<std::int64_t>& key_positions() const;

  const ModelConfig& config_;
  ParallelGroups& groups_;
  const TokenLayout& layout_;
  ModelTensors& params_;
  ModelTensors& grads_;
  const ModelTensors* compute_ = nullptr;
  MemoryTracker& tracker_;
  RopeTables rope_;
  std::vector<std::int64_t> kv_positions_;  // every sequence-axis rank's positions, rank order
  const LocalBatch* batch_ = nullptr;
};

}  // namespace origami::parallel
