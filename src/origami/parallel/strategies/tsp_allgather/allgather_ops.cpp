// TspAllgatherOps: the whole-weight gathers with their prefetch, the gradient reduce-scatters
// and the Strategy. The blocks' loops are in attention.cpp and mlp.cpp.
#include "origami/parallel/strategies/tsp_allgather/allgather_ops.h"

#include <utility>
#include <vector>

#include "origami/core/float_ops.h"
#include "origami/parallel/strategies/tsp_allgather/packing.h"

namespace origami::parallel {

TspAllgatherOps::TspAllgatherOps(const ModelConfig& config, ParallelGroups& groups,
                                 const TokenLayout& layout, ModelTensors& params,
                                 ModelTensors& grads, MemoryTracker& tracker)
    : TspOps(config, groups, layout, params, grads, tracker) {}

TspAllgatherOps::~TspAllgatherOps() {
  try {
    drain_prefetch();
    reducing_.done.wait();
  } catch (...) {  // NOLINT(bugprone-empty-catch): an error is already unwinding the step
  }
}

tsp_allgather::Shapes TspAllgatherOps::shapes() const {
  return tsp_allgather::shapes(config_, size_, batch_->batch, layout_.seq());
}

std::int64_t TspAllgatherOps::floats(Block b) const {
  // The shard sizes do not depend on the batch (rows 0 here).
  const tsp_allgather::Shapes s = tsp_allgather::shapes(config_, size_, 0, layout_.seq());
  return b == Block::Attention ? s.attention : s.mlp;
}

TspAllgatherOps::Gathered TspAllgatherOps::start_gather(Block b, std::int64_t l) {
  const std::int64_t F = floats(b);
  Gathered g;
  g.block = b;
  g.layer = l;
  const LayerTensors& L = matrices().layers[static_cast<std::size_t>(l)];
  const DType dtype = weight_dtype(l);  // bf16 under training's compute copy: half the bytes
  g.all = Tensor(tracker_, MemCategory::CommBuffers, dtype, {size_ * F});
  tsp_allgather::pack_shard(L, b == Block::Attention, g.all, rank_ * F);
  // In place: rank r's block is already at r·F (the ring all-gather then moves nothing locally).
  const kernels::WeightView own = weight_view(g.all).at(rank_ * F);
  g.done = bcast_.iall_gather(comm::ConstBuffer(own.raw(), F, dtype), g.all);
  return g;
}

TspAllgatherOps::Gathered TspAllgatherOps::take(Block b, std::int64_t l) {
  Gathered g;
  if (prefetch_.layer == l && prefetch_.block == b) {
    g = std::move(prefetch_);
    prefetch_ = Gathered();
  } else {
    // Only the first block after the LM head (or a caller not following the driver's order)
    // gets here: nothing was known to prefetch for it.
    drain_prefetch();
    g = start_gather(b, l);
  }
  g.done.wait();
  return g;
}

void TspAllgatherOps::prefetch(Block b, std::int64_t l) {
  drain_prefetch();
  // (A layer whose weights are empty here is another pipeline stage's: nothing to prefetch.)
  if (l < 0 || l >= config_.num_hidden_layers ||
      matrices().layers[static_cast<std::size_t>(l)].wq.numel() == 0)
    return;
  prefetch_ = start_gather(b, l);
}

void TspAllgatherOps::drain_prefetch() {
  prefetch_.done.wait();
  prefetch_ = Gathered();
}

void TspAllgatherOps::reduce_scatter(Block b, std::int64_t l, Tensor grad) {
  finish_reduce_scatter();
  reducing_.block = b;
  reducing_.layer = l;
  reducing_.in = std::move(grad);
  reducing_.out = Tensor(tracker_, MemCategory::CommBuffers, {floats(b)});
  reducing_.done = grads_comm_.ireduce_scatter(reducing_.in, reducing_.out);
}

void TspAllgatherOps::finish_reduce_scatter() {
  if (reducing_.layer < 0) return;
  reducing_.done.wait();
  // This rank's shard's gradient, summed over every rank's tokens: add it into its tensors.
  tsp_allgather::add_packed(
      reducing_.out.f32(),
      tsp_allgather::block_tensors(grads_.layers[static_cast<std::size_t>(reducing_.layer)],
                                   reducing_.block == Block::Attention));
  reducing_ = Reducing();
}

void TspAllgatherOps::set_batch(const LocalBatch* batch) {
  if (batch == nullptr) finish_reduce_scatter();
  TspOps::set_batch(batch);
}

void TspAllgatherOps::embed_backward(const float* dx) {
  finish_reduce_scatter();  // layer 0's attention gradient: nothing stays in flight
  TspOps::embed_backward(dx);
}

Strategy tsp_allgather_strategy(const ModelConfig& config, ParallelGroups& groups) {
  Strategy s = tsp_strategy(config, groups);  // the same shards and reduction axes
  s.make_ops = [](const ModelConfig& c, ParallelGroups& g, const TokenLayout& layout,
                  ModelTensors& params, ModelTensors& grads, MemoryTracker& tracker) {
    return std::make_unique<TspAllgatherOps>(c, g, layout, params, grads, tracker);
  };
  return s;
}

}  // namespace origami::parallel
