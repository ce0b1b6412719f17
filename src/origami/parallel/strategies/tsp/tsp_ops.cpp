// TspOps: construction, the batch, the embedding (all-to-all of ids and rows)
// and the Strategy. The attention, MLP and head schedules are in tsp_attention.cpp,
// tsp_mlp.cpp and tsp_head.cpp.
#include <algorithm>
#include <cstring>

#include "origami/core/float_ops.h"
#include "origami/kernels/embedding.h"
#include "origami/model/weights_bf16.h"
#include "origami/parallel/registry.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"

namespace origami::parallel {

TspOps::TspOps(const ModelConfig& config, ParallelGroups& groups, const TokenLayout& layout,
               ModelTensors& params, ModelTensors& grads, MemoryTracker& tracker)
    : StrategyContext(config, groups, layout, params, grads, tracker),
      size_(groups.tokens().size()),
      rank_(groups.tokens().rank()),
      axis_(groups.tokens()),
      // Collective on the axis: every rank builds its TspOps in the same order.
      bcast_(groups.tokens().split(0, groups.tokens().rank(), "tsp-shards")),
      grads_comm_(groups.tokens().split(0, groups.tokens().rank(), "tsp-grads")),
      moe_job_(config) {
  ORIGAMI_CHECK(groups.tp().size() == 1, "TSP runs on one axis; the plan has tp={}",
                groups.tp().size());
  vocab_rows_ = padded_vocab(config.vocab_size, size_) / size_;
  set_pass(0);
}

void TspOps::set_pass(int id) {
  moe_job_.set_pass(id);
  std::vector<MoeExchange>& exchanges = moe_exchanges_[id];
  exchanges.resize(static_cast<std::size_t>(config_.num_hidden_layers));
  moe_exchange_ = &exchanges;
}

void TspOps::set_batch(const LocalBatch* batch) {
  check_batch_shape(batch);
  if (batch == nullptr) emb_routes_.clear();
  batch_ = batch;
}

std::int64_t TspOps::rows() const {
  return rows_of(*batch_);
}
std::int64_t TspOps::stream_rows() const {
  return rows();
}

TspRankShapes TspOps::rank_shapes() const {
  const std::int64_t d = config_.head_dim();
  return {.D = size_,
          .L = config_.num_hidden_layers,
          .h = config_.hidden_size,
          .rows = rows(),
          .heads = config_.num_attention_heads / size_,
          .qd = config_.num_attention_heads / size_ * d,
          .kvd = kv_heads_per_rank(config_, size_) * d,
          .ffn = config_.intermediate_size / size_,
          .vocab_rows = vocab_rows_};
}

void TspOps::embed_forward(float* x) {
  const std::int64_t R = rows(), h = config_.hidden_size;
  EmbeddingRoute& route = emb_routes_[batch_];
  // Group the rank's ids by the rank owning their table row (a counting sort: stable).
  route.send.assign(static_cast<std::size_t>(size_), 0);
  for (std::int32_t id : batch_->ids) ++route.send[static_cast<std::size_t>(id / vocab_rows_)];
  std::vector<std::int64_t> start(static_cast<std::size_t>(size_), 0);
  for (int p = 1; p < size_; ++p)
    start[static_cast<std::size_t>(p)] =
        start[static_cast<std::size_t>(p - 1)] + route.send[static_cast<std::size_t>(p - 1)];
  route.order.assign(static_cast<std::size_t>(R), 0);
  std::vector<std::int32_t> send_ids(static_cast<std::size_t>(R));
  for (std::int64_t t = 0; t < R; ++t) {
    const std::int32_t id = batch_->ids[static_cast<std::size_t>(t)];
    const std::int64_t slot = start[static_cast<std::size_t>(id / vocab_rows_)]++;
    route.order[static_cast<std::size_t>(slot)] = t;
    send_ids[static_cast<std::size_t>(slot)] = id;
  }
  std::vector<std::int64_t> ones(static_cast<std::size_t>(size_), 1);
  route.recv.assign(static_cast<std::size_t>(size_), 0);
  axis_.all_to_all(route.send, ones, route.recv, ones);
  std::int64_t n_recv = 0;
  for (std::int64_t c : route.recv) n_recv += c;
  route.recv_ids.assign(static_cast<std::size_t>(n_recv), 0);
  axis_.all_to_all(send_ids, route.send, route.recv_ids, route.recv);
  // Look up the requested rows of this rank's table block and send them back.
  Tensor looked(tracker_, MemCategory::CommBuffers, {std::max<std::int64_t>(n_recv, 1), h});
  embedding_rows_as_floats(n_recv, h, route.recv_ids.data(), matrices().embed,
                           rank_ * vocab_rows_, vocab_rows_, looked.f32());  // bf16 rows widened
  Tensor back(tracker_, MemCategory::CommBuffers, {R, h});
  std::vector<std::int64_t> send_f, recv_f;
  for (int p = 0; p < size_; ++p) {
    send_f.push_back(route.recv[static_cast<std::size_t>(p)] * h);
    recv_f.push_back(route.send[static_cast<std::size_t>(p)] * h);
  }
  axis_.all_to_all(comm::ConstBuffer(looked.f32(), n_recv * h, DType::F32), send_f,
                   comm::Buffer(back.f32(), R * h, DType::F32), recv_f);
  for (std::int64_t i = 0; i < R; ++i)
    copy_floats(float_at(x, route.order[static_cast<std::size_t>(i)] * h),
                float_at(back.f32(), i * h), h);
}

void TspOps::embed_backward(const float* dx) {
  const std::int64_t R = rows(), h = config_.hidden_size;
  const auto found = emb_routes_.find(batch_);
  ORIGAMI_CHECK(found != emb_routes_.end(), "embedding backward of a micro-batch whose forward "
                                            "did not run");
  const EmbeddingRoute& route = found->second;
  Tensor out(tracker_, MemCategory::CommBuffers, {R, h});
  for (std::int64_t i = 0; i < R; ++i)
    copy_floats(float_at(out.f32(), i * h),
                float_at(dx, route.order[static_cast<std::size_t>(i)] * h), h);
  const auto n_recv = static_cast<std::int64_t>(route.recv_ids.size());
  Tensor in(tracker_, MemCategory::CommBuffers, {std::max<std::int64_t>(n_recv, 1), h});
  std::vector<std::int64_t> send_f, recv_f;
  for (int p = 0; p < size_; ++p) {
    send_f.push_back(route.send[static_cast<std::size_t>(p)] * h);
    recv_f.push_back(route.recv[static_cast<std::size_t>(p)] * h);
  }
  // Row gradients go to the rows' owners, which add them into their table block.
  axis_.all_to_all(comm::ConstBuffer(out.f32(), R * h, DType::F32), send_f,
                   comm::Buffer(in.f32(), n_recv * h, DType::F32), recv_f);
  kernels::embedding_backward(n_recv, h, route.recv_ids.data(), in.f32(), rank_ * vocab_rows_,
                              vocab_rows_, grads_.embed.f32());
  emb_routes_.erase(found);
}

Strategy tsp_strategy(const ModelConfig& config, ParallelGroups& groups) {
  const ParallelConfig& plan = groups.plan();
  ORIGAMI_CHECK(plan.tp == 1 && plan.sp == 1, "tsp_strategy needs a TSP plan (tsp axis only)");
  Strategy s;
  groups.split_kv_replicas(kv_replicas(config, groups.tokens().size()));
  s.specs = make_shard_specs(config, groups.tokens().size(), groups.tokens().rank());
  if (plan.moe_schedule == MoeSchedule::Expert)
    own_whole_experts(config, groups.tokens().size(), groups.tokens().rank(), s.specs);
  assign_reduction_axes(plan, s.specs);
  s.make_ops = [](const ModelConfig& c, ParallelGroups& g, const TokenLayout& layout,
                  ModelTensors& params, ModelTensors& grads, MemoryTracker& tracker) {
    return std::make_unique<TspOps>(c, g, layout, params, grads, tracker);
  };
  return s;
}

}  // namespace origami::parallel
