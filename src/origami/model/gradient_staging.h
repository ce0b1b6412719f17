// Gradients held in bf16 while the kernels write fp32 (--grad-reduce-dtype bf16,
// core/precision.h). The blocks and the driver write a rank's gradients into `written`, a
// ModelTensors whose tensors are undefined outside a unit's backward; the step's gradients are
// `held`, bf16 tensors of the same shapes (MemCategory::Gradients, 2 bytes per parameter). A
// unit's backward is bracketed: open() gives the unit's tensors in `written` fp32 zeros
// (MemCategory::Workspace: one unit at a time), close() adds them into `held` (the fp32 sum
// rounded once, kernels::add_into) and frees them; a unit opened again without a close (its
// backward threw) drops what it held. The units: one layer's tensors; the LM head's
// matrix with the final norm's weight; the embedding. So every micro-batch's gradient of a
// tensor is rounded to bf16 once as it joins the step's sum, as Megatron accumulates into a bf16
// main_grad, and what the reductions, the norm, clipping and AdamW read is the bf16 buffer.
// A tied table is a unit twice (the head's dW, then the embedding's scatter-add), rounded twice.
#pragma once

#include <cstdint>

#include "origami/core/memory_tracker.h"
#include "origami/model/weights.h"

namespace origami {

class GradientStaging {
 public:
  // `held`: bf16 gradients; `written`: undefined_like(held), which the blocks reference.
  GradientStaging(ModelTensors& written, ModelTensors& held, MemoryTracker& tracker)
      : written_(written), held_(held), tracker_(tracker) {}

  void open_layer(std::int64_t l);
  void close_layer(std::int64_t l);
  void open_head();  // the head's matrix (the embedding when tied) and the final norm
  void close_head();
  void open_embedding();
  void close_embedding();

 private:
  void open(Tensor& written, const Tensor& held);
  void close(Tensor& written, Tensor& held);

  ModelTensors& written_;
  ModelTensors& held_;
  MemoryTracker& tracker_;
};

}  // namespace origami
