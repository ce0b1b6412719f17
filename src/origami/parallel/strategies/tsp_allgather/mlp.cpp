// Gated MLP, allgather schedule (schedule.h): layer l's whole MLP weight [M_0..M_{D-1}] is
// taken from the prefetch and the next block's gather started; every column block j then runs
// on the rank's own rows (mlp_block_forward into an MlpSlot: its gate/up pre-activations written straight
// into slot j of the saved tensors, group-major as under the broadcast-ring schedule) and its
// partial outputs sum into x: no activation traffic. Backward: the weights gathered again,
// each block's backward writes its slot of the whole-weight gradient, reduce-scattered to the
// owners (waited at the end of the next block).
#include "origami/parallel/strategies/tsp_allgather/allgather_ops.h"
#include "origami/parallel/strategies/tsp_allgather/packing.h"

namespace origami::parallel {

void TspAllgatherOps::mlp_forward(std::int64_t l, const float* n, MlpSaved& s, float* x) {
  const Gathered w = take(Block::Mlp, l);
  if (next_attention_layer_ == l)  // full recompute: the next block is this MLP's backward
    prefetch(Block::Mlp, l);
  else
    prefetch(Block::Attention, next_attention_layer_);  // -1 after the last layer: none
  const tsp_allgather::Shapes sh = shapes();
  const std::int64_t R = sh.rows, ffn = sh.group_ffn;
  s.a = Tensor(tracker_, MemCategory::Activations, {size_, R, ffn});
  s.u = Tensor(tracker_, MemCategory::Activations, {size_, R, ffn});
  const MlpDims dims{.rows = R, .hidden = sh.hidden, .ffn = ffn};
  for (int j = 0; j < size_; ++j)
    mlp_block_forward(
        dims, n, tsp_allgather::mlp_weights(weight_view(w.all).at(j * sh.mlp), sh), tracker_,
        MlpSlot{float_at(s.a.f32(), j * R * ffn), float_at(s.u.f32(), j * R * ffn)}, x);
  finish_reduce_scatter();
}

void TspAllgatherOps::mlp_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dx,
                                   float* dn) {
  const Gathered w = take(Block::Mlp, l);
  prefetch(Block::Attention, l);  // the next block is this layer's attention backward
  const tsp_allgather::Shapes sh = shapes();
  const std::int64_t R = sh.rows, ffn = sh.group_ffn;
  const MlpDims dims{.rows = R, .hidden = sh.hidden, .ffn = ffn};
  Tensor grad(tracker_, MemCategory::CommBuffers, {size_ * sh.mlp});
  grad.zero();
  for (int j = 0; j < size_; ++j) {
    const MlpWeights wj = tsp_allgather::mlp_weights(weight_view(w.all).at(j * sh.mlp), sh);
    const MlpGrads gj = tsp_allgather::mlp_grads(float_at(grad.f32(), j * sh.mlp), sh);
    if (s.a.defined()) {
      mlp_block_backward(dims, n, wj,
                         MlpSavedView{float_at(s.a.f32(), j * R * ffn),
                                      float_at(s.u.f32(), j * R * ffn)},
                         dx, tracker_, dn, gj);
    } else {  // recompute policies mlp and full
      MlpSaved again;
      mlp_block_recompute(dims, n, wj, tracker_, again);
      mlp_block_backward(dims, n, wj, again, dx, tracker_, dn, gj);
    }
  }
  s = MlpSaved();
  reduce_scatter(Block::Mlp, l, std::move(grad));
}

}  // namespace origami::parallel
