// The baseline strategies' blocks (DP, TP, TP-SP, SP/CP, TP+SP and their compositions with
// DP), as one BlockOps over the tensor (T), sequence (Σ) and data (P) axes. Per rank, with
// R = B*S/Σ token rows (the rank's sequence shard of its data shard), T | heads, kv heads, f:
//
// clang-format off
//   tensor / block          shape on a rank       forward comm            backward (conjugate)
//   residual stream x       [R,h] or [R/T,h]*     -                       -
//   embedding (vocab-par.)  [Vp/T, h]             all-reduce tp /         identity /
//                                                 reduce-scatter tp*      all-gather tp*
//   block input             [R, h]                identity /              all-reduce tp /
//                                                 all-gather tp*          reduce-scatter tp*
//   W_Q/W_K/W_V (column)    [H/T*d|Kv/T*d, h]     K/V all-gather sp       K/V re-gather sp,
//                                                                         dK/dV reduce-scatter sp
//   W_O (row-parallel)      [h, H/T*d]            all-reduce tp /         identity /
//                                                 reduce-scatter tp*      all-gather tp*
//   W_gate/W_up, W_down     [f/T, h], [h, f/T]    as W_Q / W_O, no sp traffic
//   LM head (vocab-par.)    [Vp/T, h]             all-gather tp* of the   dX all-reduce tp /
//                                                 normed rows; max/sum    reduce-scatter tp*
//                                                 and target logit
//                                                 combined over tp
//   RMSNorm weights         [h] replicated        -                       -
//   mixture of experts      router [E, h] repl.;  as the dense MLP, and  as the dense MLP, and
//   (mesh_moe.cpp)          each expert as the    the balance's 2E       d routing weight
//                           dense MLP             doubles all-reduced    [R, k] doubles
//                                                 over sp, then dp       all-reduced over tp
//   (* = with sequence-parallel regions, TP-SP: the stream holds rows [t*R/T, (t+1)*R/T))
// clang-format on
//
// Every message of a micro-batch with its bytes, and each block's conjugate pairs: schedule.h.
// Reduction groups: stated once, by assign_reduction_axes (registry.h), and followed by
// rank_model.h.
#pragma once

#include <vector>

#include "origami/model/block_ops.h"
#include "origami/parallel/attention_cp.h"
#include "origami/parallel/moe_balance.h"
#include "origami/parallel/parallel_config.h"
#include "origami/parallel/shard_spec.h"
#include "origami/parallel/strategies/mesh/schedule.h"
#include "origami/parallel/strategy_context.h"

namespace origami::parallel {

class MeshOps final : public StrategyContext {
 public:
  MeshOps(const ModelConfig& config, ParallelGroups& groups, const TokenLayout& layout,
          ModelTensors& params, ModelTensors& grads, MemoryTracker& tracker);

  void set_batch(const LocalBatch* batch) override;

  std::int64_t stream_rows() const override;
  void embed_forward(float* x) override;
  void embed_backward(const float* dx) override;
  void attention_forward(std::int64_t l, const float* n, AttentionSaved& s, float* x,
                         const ForwardStep& step) override;
  void attention_backward(std::int64_t l, const float* n, const AttentionSaved& s, const float* dx,
                          float* dn) override;
  void mlp_forward(std::int64_t l, const float* n, MlpSaved& s, float* x) override;
  void mlp_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dx,
                    float* dn) override;
  kernels::LossSum head_forward(const float* nf, bool with_backward) override;
  void head_backward(float grad_scale, float* dnf) override;
  // Mixture of experts (mesh_moe.cpp, docs/moe.md): the balance over the job's micro-batch.
  void set_aux_weight(double weight) override { moe_job_.set_aux_weight(weight); }
  void set_pass(int id) override { moe_job_.set_pass(id); }
  double router_aux_loss() const override { return moe_job_.router_aux_loss(); }
  MoeLoad moe_load() const override { return moe_job_.load(); }

 private:
  std::int64_t rows() const;  // R: every row of the rank's sequence shard
  bool split_stream() const { return mesh_splits_stream(seqpar_, tp_size_); }
  MeshRankShapes shapes() const;  // schedule.h's terms, for the current batch
  // Entry to a tensor-parallel region: the block's input on all R rows.
  const float* gather_rows(const float* stream, Tensor& holder);
  // Exit: a partial [R, h] sum over this rank's shard added to the stream rows.
  void reduce_rows_into(Tensor& partial, float* stream);
  // Where a block writes its partial output (the stream itself when T = 1).
  float* partial_target(Tensor& holder, float* stream);
  AttentionDims attention_dims() const;
  // The mixture-of-experts MLP on the block's R rows: the single device's blocks (moe.h) over
  // this rank's f/T columns of every expert, entered and left as the dense MLP.
  MoeDims moe_dims() const;
  void moe_forward(std::int64_t l, const float* n, MlpSaved& s, float* x);
  void moe_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dx, float* dn);

  int tp_size_, tp_rank_;
  bool seqpar_;
  std::int64_t vocab_rows_, vocab_first_;  // the rank's vocabulary block
  // LM head state between forward and backward.
  Tensor head_logits_, head_lse_, head_input_holder_;
  const float* head_input_ = nullptr;
  MoeJobBalance moe_job_;
};

// The baselines as a Strategy for RankModel: tensor-parallel specs for the plan's tp axis,
// reduction axes per assign_reduction_axes, MeshOps blocks.
Strategy mesh_strategy(const ModelConfig& config, ParallelGroups& groups);

}  // namespace origami::parallel
