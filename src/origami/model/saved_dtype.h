// Saved activations kept in another dtype than fp32 (training's --precision bf16: the driver
// narrows what a layer's backward needs once the forward has made it, and widens it back right
// before that backward reads it, so that the L layers' saved tensors take half the bytes while
// every block computes in fp32 and never sees the stored form). Statistics (RMSNorm's rstd,
// attention's LSE) and the experts' routing stay fp32 (core/precision.h).
#pragma once

#include "origami/core/tensor.h"
#include "origami/model/blocks.h"

namespace origami {

// A copy of src in `dtype` (bf16: nearest even; fp32 from bf16: exact), accounted under
// `category` on src's tracker; src is left as it was. Undefined src: undefined.
Tensor copy_in(DType dtype, const Tensor& src, MemCategory category);

// t replaced by its copy in `dtype` under its own category; nothing when t is undefined or in
// `dtype` already.
void store_in(DType dtype, Tensor& t);
// t replaced by its exact fp32 copy under `category` (the backward's workspace); nothing when
// t is undefined or fp32 already.
void restore_f32(Tensor& t, MemCategory category);

// The same for the blocks' saved tensors: attention's q, k, v and output (not the LSE), the
// dense MLP's gate and up pre-activations.
void store_in(DType dtype, AttentionSaved& s);
void store_in(DType dtype, MlpSaved& s);
void restore_f32(AttentionSaved& s, MemCategory category);
void restore_f32(MlpSaved& s, MemCategory category);

}  // namespace origami
