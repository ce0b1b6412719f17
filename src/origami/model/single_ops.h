// The single-device strategy's blocks: the whole model and the whole sequence on one rank, no
// communication. LlamaModel runs the shared driver (driver.h) over these.
#pragma once

#include <vector>

#include "origami/model/block_ops.h"
#include "origami/model/config.h"
#include "origami/model/moe.h"
#include "origami/model/weights.h"

namespace origami {

class SingleOps final : public BlockOps {
 public:
  SingleOps(const ModelConfig& config, ModelTensors& params, ModelTensors& grads,
            MemoryTracker& tracker);

  // B sequences of S tokens: ids and labels [B, S], and for packed documents their ids and
  // positions [B, S] (TokenBatch; null: unbroken rows), kept by the caller until the run ends.
  void set_batch(std::int64_t batch, std::int64_t seq, const std::int32_t* ids,
                 const std::int32_t* labels, const std::int32_t* documents = nullptr,
                 const std::int64_t* positions = nullptr);

  // Mixture of experts (config.is_moe()): this micro-batch's share of the step's auxiliary
  // loss (1 / micro-batches of the step), which scales its gradient.
  void set_aux_weight(double weight) { aux_weight_ = weight; }
  // The last forward's load-balancing loss: router_aux_loss_coef x the mean over the layers of
  // each layer's balance (moe.h) over this micro-batch's tokens, unweighted; 0 for a dense
  // model. And its expert load summed over the layers (kept assignments per expert, the
  // assignments the capacity dropped); empty for a dense model.
  double router_aux_loss() const;
  MoeLoad moe_load() const;

  std::int64_t stream_rows() const override { return batch_ * seq_; }
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

 private:
  AttentionDims attention_dims() const;
  MlpDims mlp_dims() const;
  MoeDims moe_dims() const;

  const ModelConfig& config_;
  ModelTensors& params_;
  ModelTensors& grads_;
  MemoryTracker& tracker_;
  RopeTables rope_;
  std::int64_t batch_ = 0, seq_ = 0;
  const std::int32_t* ids_ = nullptr;
  const std::int32_t* labels_ = nullptr;
  RowDocuments documents_;
  std::vector<std::int64_t> positions_;
  // LM head state between forward and backward (the logits become dlogits in place).
  Tensor logits_, lse_;
  const float* head_input_ = nullptr;
  // Per layer, set (not added) by each forward, so a recomputed forward counts once.
  std::vector<MoeStats> stats_;
  double aux_weight_ = 1.0;
};

}  // namespace origami
