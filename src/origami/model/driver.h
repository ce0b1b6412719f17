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

#include <map>
#include <string>
#include <vector>

#include "origami/model/block_ops.h"
#include "origami/model/config.h"
#include "origami/model/gradient_staging.h"
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

  // A pipeline stage's part of one micro-batch (parallel/pipeline_stages.h), for schedules
  // that interleave micro-batches (1F1B): the layers [first, last), with the embedding when
  // first == 0 and the final norm, LM head and loss when last == L. stage_forward keeps what
  // the backward needs under the micro-batch's `id` (the recompute policy applies) until
  // stage_backward(id), so several micro-batches can be in flight; the BlockOps must hold
  // micro-batch `id`'s batch during both calls. run(true, s) is stage_forward(0, L) followed
  // by stage_backward, and the same kernels in the same order.
  //   x   in: the stage's input stream rows (the previous stage's output; ignored by the
  //       first stage, which embeds); out: the stage's output (empty on the last stage).
  //   dx  in: the gradient of the stage's output (ignored by the last stage, which starts
  //       from the loss scaled by grad_scale); out: the gradient of the stage's input
  //       (already applied to the embedding on the first stage).
  // Returns the head's local loss sum on the last stage, zero elsewhere.
  kernels::LossSum stage_forward(int id, std::int64_t first, std::int64_t last, Tensor& x);
  void stage_backward(int id, double grad_scale, Tensor& dx);
  // The micro-batches whose stage_forward ran and whose stage_backward has not.
  std::size_t in_flight() const { return in_flight_.size(); }

  // bf16 gradients (--grad-reduce-dtype bf16): each unit's backward (a layer; the head with
  // the final norm; the embedding) is bracketed by the staging's open and close, with
  // ops.settle_gradients() before the close. nullptr (the default): the grads given to the
  // constructor are written directly.
  void set_gradient_staging(GradientStaging* staging) { staging_ = staging; }

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
  // Layers [first, last) on x, layer l keeping its saved tensors in saved[l - first]; the
  // last one prefetches nothing (the next layer, if any, is another stage's).
  void layers_forward(std::int64_t first, std::int64_t last, Tensor& x,
                      std::vector<LayerSaved>& saved, Save save);
  // One micro-batch's saved state on this stage, between stage_forward and stage_backward.
  struct StageSaved {
    std::int64_t first = 0, last = 0;
    std::vector<LayerSaved> layers;  // layer l at l - first
    Tensor x, rstd_f, nf;            // the last stage's: the stream into the final norm
  };

  const ModelConfig& config_;
  ModelTensors& params_;
  ModelTensors& grads_;
  BlockOps& ops_;
  MemoryTracker& tracker_;
  Recompute recompute_;
  std::map<int, StageSaved> in_flight_;  // by micro-batch id
  GradientStaging* staging_ = nullptr;
};

}  // namespace origami
