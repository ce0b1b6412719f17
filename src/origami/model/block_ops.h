// What a parallel strategy provides to the model driver: the forward and backward of each
// block kind on this rank's rows, with whatever communication the strategy needs inside.
// The driver (driver.h) owns the layer loop, the residual stream, the RMSNorms, what is saved
// and what is recomputed; a strategy owns how a block reaches the weights and tokens it needs.
//
// Conventions: the residual stream x holds stream_rows() rows of width h on this rank (the
// rank's own tokens in the strategy's layout). *_forward adds the block's output to x;
// *_backward receives dx (the gradient of the block's output, stream rows) and adds the
// gradient of the block's input to dn (stream rows); weight gradients accumulate into the
// rank's gradient tensors. Every rank of a group calls the same methods in the same order
// (they may communicate).
#pragma once

#include <cstdint>

#include "origami/kernels/cross_entropy.h"
#include "origami/model/blocks.h"

namespace origami {

// Where an attention forward sits in the driver's schedule, said by the driver so that a
// strategy that moves weights can prefetch without guessing from hidden state: the layer
// whose attention runs next (l + 1 in the forward; l itself when this forward is a full
// recompute inside the backward, whose next attention call is l's backward; -1: none).
struct ForwardStep {
  std::int64_t next_attention_layer = -1;
};

class BlockOps {
 public:
  virtual ~BlockOps() = default;

  virtual std::int64_t stream_rows() const = 0;
  // The dtype the saved activations are kept in between a layer's forward and its backward
  // (the driver narrows and widens them: saved_dtype.h) and K/V are held in (AttentionDims::kv):
  // bf16 under training's --precision bf16, else fp32. The blocks compute in fp32 either way.
  virtual DType activation_dtype() const { return DType::F32; }

  virtual void embed_forward(float* x) = 0;
  virtual void embed_backward(const float* dx) = 0;

  virtual void attention_forward(std::int64_t layer, const float* n, AttentionSaved& saved,
                                 float* x, const ForwardStep& step) = 0;
  virtual void attention_backward(std::int64_t layer, const float* n, const AttentionSaved& saved,
                                  const float* dx, float* dn) = 0;

  // With saved left empty by the driver (recompute mlp/full), the backward recomputes it.
  virtual void mlp_forward(std::int64_t layer, const float* n, MlpSaved& saved, float* x) = 0;
  virtual void mlp_backward(std::int64_t layer, const float* n, MlpSaved& saved, const float* dx,
                            float* dn) = 0;

  // LM head and cross-entropy on the final-normed stream rows. Returns this rank's loss sum
  // and unmasked count over the tokens it is responsible for (the strategy documents over
  // which group these add up). The head keeps what its backward needs until head_backward
  // (or until the next head_forward when with_backward is false).
  virtual kernels::LossSum head_forward(const float* nf, bool with_backward) = 0;
  // grad_scale multiplies the gradient of the loss sum (1 / unmasked tokens of the step).
  virtual void head_backward(float grad_scale, float* dnf) = 0;

  // Completes any weight-gradient work still in flight (a reduction whose result is added
  // into the gradients later than the block that started it), so that every backward called so
  // far has written all of its weight gradients. The driver calls it before it takes a unit's
  // gradients (model/gradient_staging.h); a strategy that adds within each block has nothing
  // to do.
  virtual void settle_gradients() {}
};

}  // namespace origami
