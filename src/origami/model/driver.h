// The one model driver every strategy runs: embedding -> L x [RMSNorm, attention, residual,
// RMSNorm, gated MLP, residual] -> RMSNorm -> LM head + loss, and the reverse, over a
// strategy's BlockOps on the rank's stream rows. The recompute policy lives here, once:
//   none  every layer saves its input, the residual after attention, both rstd vectors and
//         the blocks' saved tensors (attention q/k/v/out/lse, MLP gate/up pre-activations);
//   mlp   as none, but the MLP's gate/up pre-activations are dropped after the forward and
//         recomputed in backward (MlpSaved left empty);
//   full  only each layer's input is saved; backward re-runs the layer's forward (its
//         communication included) and then its backward.
// All saved tensors are MemCategory::Activations on the rank's tracker, so the policy shows in
// the tracker's peak.
#pragma once

#include <string>
#include <vector>

#include "origami/model/block_ops.h"
#include "origami/model/config.h"
#include "origami/model/recompute.h"
#include "origami/model/weights.h"

namespace origami {

class ModelDriver {
 public:
  // params/grads: the rank's (possibly sharded) tensors; only the RMSNorm weights are read
  // here (replicated), the rest is the BlockOps' business.
  ModelDriver(const ModelConfig& config, ModelTensors& params, ModelTensors& grads, BlockOps& ops,
              MemoryTracker& tracker, Recompute recompute);

  // One micro-batch (already handed to the BlockOps). With backward, gradients accumulate and
  // the gradient of the loss sum is scaled by grad_scale. Returns the head's local loss sum.
  kernels::LossSum run(bool backward, double grad_scale);

  // The forward without the head, nothing saved (inference's prefill, infer/engine.cpp): the
  // embedding and the L layers. Returns the residual stream after the last layer,
  // stream_rows() x h (MemCategory::Workspace).
  Tensor forward_stream();

 private:
  struct LayerSaved {
    Tensor x_in, rstd1;
    AttentionSaved attention;
    Tensor x_mid, rstd2;
    MlpSaved mlp;
  };
  // Runs layer l on x in place; keeps in s what `save` asks for.
  enum class Save { Nothing, InputOnly, Policy, All };
  // `step` says what follows (block_ops.h): the next layer, or this layer's backward.
  void layer_forward(std::int64_t l, Tensor& x, LayerSaved& s, Save save, const ForwardStep& step);
  void layer_backward(std::int64_t l, LayerSaved& s, Tensor& dx);
  // The embedding and the L layers' forward, each layer keeping in saved[l] what `save` asks.
  Tensor embed_and_layers(std::vector<LayerSaved>& saved, Save save);

  const ModelConfig& config_;
  ModelTensors& params_;
  ModelTensors& grads_;
  BlockOps& ops_;
  MemoryTracker& tracker_;
  Recompute recompute_;
};

}  // namespace origami
