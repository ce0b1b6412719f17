#include "origami/parallel/strategies/mesh/mesh_ops.h"

#include "origami/parallel/registry.h"

#include <limits>

#include "origami/core/float_ops.h"
#include "origami/kernels/embedding.h"
#include "origami/kernels/gemm.h"
#include "origami/model/weights_bf16.h"

namespace origami::parallel {

MeshOps::MeshOps(const ModelConfig& config, ParallelGroups& groups, const TokenLayout& layout,
                 ModelTensors& params, ModelTensors& grads, MemoryTracker& tracker)
    : StrategyContext(config, groups, layout, params, grads, tracker),
      tp_size_(groups.tp().size()),
      tp_rank_(groups.tp().rank()),
      seqpar_(groups.plan().sequence_parallel),
      moe_job_(config) {
  vocab_rows_ = padded_vocab(config.vocab_size, tp_size_) / tp_size_;
  vocab_first_ = tp_rank_ * vocab_rows_;
}

void MeshOps::set_batch(const LocalBatch* batch) {
  check_batch_shape(batch);
  if (batch != nullptr)
    ORIGAMI_CHECK(!split_stream() || rows_of(*batch) % tp_size_ == 0,
                  "sequence-parallel regions need the rank's {} rows divisible by tp={}",
                  rows_of(*batch), tp_size_);
  batch_ = batch;
}
std::int64_t MeshOps::rows() const {
  return rows_of(*batch_);
}
std::int64_t MeshOps::stream_rows() const {
  return shapes().stream_rows();
}
MeshRankShapes MeshOps::shapes() const {
  return {.T = tp_size_,
          .S = groups_.sp().size(),
          .seqpar = seqpar_,
          .L = config_.num_hidden_layers,
          .h = config_.hidden_size,
          .rows = rows(),
          .kvd = kv_heads_per_rank(config_, tp_size_) * config_.head_dim()};
}

const float* MeshOps::gather_rows(const float* stream, Tensor& holder) {
  if (!split_stream()) return stream;
  holder = Tensor(tracker_, MemCategory::CommBuffers, {mesh_gathered_rows_floats(shapes())});
  groups_.tp().all_gather(
      comm::ConstBuffer(stream, stream_rows() * config_.hidden_size, DType::F32), holder);
  return holder.f32();
}

float* MeshOps::partial_target(Tensor& holder, float* stream) {
  if (tp_size_ == 1) return stream;
  holder = Tensor(tracker_, MemCategory::Workspace, {rows(), config_.hidden_size});
  return holder.f32();
}

void MeshOps::reduce_rows_into(Tensor& partial, float* stream) {
  if (tp_size_ == 1) return;  // the block wrote into the stream directly
  const std::int64_t n = stream_rows() * config_.hidden_size;
  if (split_stream()) {  // TP-SP: each rank keeps the sum of its own rows
    Tensor mine(tracker_, MemCategory::CommBuffers, {n});
    groups_.tp().reduce_scatter(partial, mine);
    add_floats(stream, mine.f32(), n);
  } else {  // TP: every rank needs the sum of every row
    groups_.tp().all_reduce(partial, partial);
    add_floats(stream, partial.f32(), n);
  }
  partial = Tensor();
}

AttentionDims MeshOps::attention_dims() const {
  return {.batch = batch_->batch,
          .seq = layout_.local_seq(),
          .hidden = config_.hidden_size,
          .heads = config_.num_attention_heads / tp_size_,
          .kv_heads = kv_heads_per_rank(config_, tp_size_),
          .head_dim = config_.head_dim(),
          .documents = local_documents(*batch_),
          .kv = activation_dtype()};
}

namespace {
AttentionWeights attention_weights(const LayerTensors& L) {
  return {weight_view(L.wq), weight_view(L.wk), weight_view(L.wv), weight_view(L.wo)};
}
AttentionGrads attention_grads(LayerTensors& G) {
  return {G.wq.f32(), G.wk.f32(), G.wv.f32(), G.wo.f32()};
}
}  // namespace

void MeshOps::embed_forward(float* x) {
  Tensor partial;
  float* y = partial_target(partial, x);
  // The compute copy's rows under --precision bf16 (widened exactly), else the fp32 table.
  embedding_rows_as_floats(rows(), config_.hidden_size, batch_->ids.data(), matrices().embed,
                           vocab_first_, vocab_rows_, y);
  reduce_rows_into(partial, x);
}

void MeshOps::embed_backward(const float* dx) {
  Tensor holder;
  const float* dy = gather_rows(dx, holder);
  kernels::embedding_backward(rows(), config_.hidden_size, batch_->ids.data(), dy, vocab_first_,
                              vocab_rows_, grads_.embed.f32());
}

void MeshOps::attention_forward(std::int64_t l, const float* n, AttentionSaved& s, float* x,
                                const ForwardStep& /*step*/) {
  const LayerTensors& L = matrices().layers[static_cast<std::size_t>(l)];
  Tensor in_holder, out_holder;
  const float* in = gather_rows(n, in_holder);
  float* y = partial_target(out_holder, x);
  if (groups_.sp().size() > 1) {
    const SequenceAxis axis{&groups_.sp(), query_positions(), &key_positions(), nullptr,
                            nullptr, row_documents(*batch_), layout_.seq()};
    cp_attention_forward(attention_dims(), in, attention_weights(L), axis, rope_, tracker_, s, y);
  } else {
    attention_block_forward(attention_dims(), in, attention_weights(L), layout_.positions().data(),
                            rope_, tracker_, s, y);
  }
  in_holder = Tensor();
  reduce_rows_into(out_holder, x);
}

void MeshOps::attention_backward(std::int64_t l, const float* n, const AttentionSaved& s,
                                 const float* dx, float* dn) {
  const LayerTensors& L = matrices().layers[static_cast<std::size_t>(l)];
  LayerTensors& G = grads_.layers[static_cast<std::size_t>(l)];
  Tensor dy_holder, in_holder, dn_holder;
  const float* dy = gather_rows(dx, dy_holder);
  const float* in = gather_rows(n, in_holder);
  float* dnp = partial_target(dn_holder, dn);
  if (groups_.sp().size() > 1) {
    const SequenceAxis axis{&groups_.sp(), query_positions(), &key_positions(), nullptr,
                            nullptr, row_documents(*batch_), layout_.seq()};
    cp_attention_backward(attention_dims(), in, attention_weights(L), axis, rope_, read_view(s), dy, tracker_,
                          dnp, attention_grads(G));
  } else {
    attention_block_backward(attention_dims(), in, attention_weights(L), layout_.positions().data(),
                             rope_, s, dy, tracker_, dnp, attention_grads(G));
  }
  reduce_rows_into(dn_holder, dn);
}

void MeshOps::mlp_forward(std::int64_t l, const float* n, MlpSaved& s, float* x) {
  if (config_.is_moe()) return moe_forward(l, n, s, x);
  const LayerTensors& L = matrices().layers[static_cast<std::size_t>(l)];
  Tensor in_holder, out_holder;
  const float* in = gather_rows(n, in_holder);
  float* y = partial_target(out_holder, x);
  const MlpDims dims{
      .rows = rows(), .hidden = config_.hidden_size, .ffn = config_.intermediate_size / tp_size_};
  const MlpWeights w{weight_view(L.w_gate), weight_view(L.w_up), weight_view(L.w_down)};
  mlp_block_forward(dims, in, w, tracker_, s, y);
  in_holder = Tensor();
  reduce_rows_into(out_holder, x);
}

void MeshOps::mlp_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dx,
                           float* dn) {
  if (config_.is_moe()) return moe_backward(l, n, s, dx, dn);
  const LayerTensors& L = matrices().layers[static_cast<std::size_t>(l)];
  LayerTensors& G = grads_.layers[static_cast<std::size_t>(l)];
  const MlpDims dims{
      .rows = rows(), .hidden = config_.hidden_size, .ffn = config_.intermediate_size / tp_size_};
  Tensor dy_holder, in_holder, dn_holder;
  const float* dy = gather_rows(dx, dy_holder);
  const float* in = gather_rows(n, in_holder);
  const MlpWeights w{weight_view(L.w_gate), weight_view(L.w_up), weight_view(L.w_down)};
  if (!s.a.defined()) mlp_block_recompute(dims, in, w, tracker_, s);  // recompute policy
  float* dnp = partial_target(dn_holder, dn);
  mlp_block_backward(dims, in, w, s, dy, tracker_, dnp,
                     {G.w_gate.f32(), G.w_up.f32(), G.w_down.f32()});
  s = MlpSaved();
  reduce_rows_into(dn_holder, dn);
}

kernels::LossSum MeshOps::head_forward(const float* nf, bool with_backward) {
  const std::int64_t R = rows(), h = config_.hidden_size;
  head_input_ = gather_rows(nf, head_input_holder_);
  head_logits_ = Tensor(tracker_, MemCategory::Logits, {R, vocab_rows_});
  kernels::linear_forward(R, h, vocab_rows_, head_input_, weight_view(matrices().head()),
                          head_logits_.f32());
  Tensor stats(tracker_, MemCategory::Workspace, {3, R});  // running max, sum-exp, target logit
  float* run_max = stats.f32();
  float* run_sum = float_at(run_max, R);
  float* target = float_at(run_sum, R);
  fill_floats(run_max, R, -std::numeric_limits<float>::infinity());
  kernels::softmax_stats_update(R, vocab_rows_, head_logits_.f32(), vocab_first_,
                                config_.vocab_size, batch_->labels.data(), run_max, run_sum,
                                target);
  if (tp_size_ > 1) {
    // Combine the vocabulary blocks: every rank merges all blocks in rank order (identical
    // results everywhere); the target logit lives on exactly one rank (0 elsewhere): sum.
    Tensor all(tracker_, MemCategory::CommBuffers, {mesh_head_stats_floats(shapes())});
    groups_.tp().all_gather(comm::ConstBuffer(run_max, 2 * R, DType::F32), all);
    copy_floats(run_max, all.f32(), 2 * R);
    for (int p = 1; p < tp_size_; ++p)
      kernels::softmax_stats_merge(R, run_max, run_sum, float_at(all.f32(), p * 2 * R),
                                   float_at(all.f32(), p * 2 * R + R));
    groups_.tp().all_reduce(comm::ConstBuffer(target, R, DType::F32),
                            comm::Buffer(target, R, DType::F32));
  }
  head_lse_ = Tensor(tracker_, MemCategory::Workspace, {R});  // as the single-device head
  const kernels::LossSum loss = kernels::softmax_stats_finish(
      R, run_max, run_sum, target, batch_->labels.data(), head_lse_.f32());
  if (!with_backward) {
    head_logits_ = Tensor();
    head_lse_ = Tensor();
    head_input_holder_ = Tensor();
    head_input_ = nullptr;
  }
  return loss;
}

void MeshOps::head_backward(float grad_scale, float* dnf) {
  ORIGAMI_CHECK(head_logits_.defined(), "head_backward without a head_forward that kept its state");
  const std::int64_t R = rows(), h = config_.hidden_size;
  float* dlogits = head_logits_.f32();
  kernels::cross_entropy_backward(R, vocab_rows_, head_logits_.f32(), vocab_first_,
                                  config_.vocab_size, batch_->labels.data(), head_lse_.f32(),
                                  grad_scale, dlogits);
  const kernels::WeightView head = weight_view(matrices().head());
  kernels::linear_backward_weight(R, h, vocab_rows_, dlogits, head_input_, grads_.head().f32(),
                                  head.dtype());
  Tensor holder;
  float* d = partial_target(holder, dnf);
  kernels::linear_backward_input(R, h, vocab_rows_, dlogits, head, d);
  head_logits_ = Tensor();
  head_lse_ = Tensor();
  head_input_holder_ = Tensor();
  head_input_ = nullptr;
  reduce_rows_into(holder, dnf);
}

Strategy mesh_strategy(const ModelConfig& config, ParallelGroups& groups) {
  Strategy s;
  groups.split_kv_replicas(kv_replicas(config, groups.tp().size()));
  s.specs = make_shard_specs(config, groups.tp().size(), groups.tp().rank());
  assign_reduction_axes(groups.plan(), s.specs);
  s.make_ops = [](const ModelConfig& c, ParallelGroups& g, const TokenLayout& layout,
                  ModelTensors& params, ModelTensors& grads, MemoryTracker& tracker) {
    return std::make_unique<MeshOps>(c, g, layout, params, grads, tracker);
  };
  return s;
}

}  // namespace origami::parallel
