#include "origami/parallel/rank_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "origami/parallel/pipeline_stages.h"
#include "origami/parallel/registry.h"
#include "origami/parallel/training_precision.h"

#include "origami/model/compute_copy.h"

#include "origami/core/dry_run.h"
#include "origami/core/float_ops.h"
#include "origami/kernels/convert.h"
#include "origami/kernels/optimizer.h"

namespace origami::parallel {

namespace {
TokenLayout make_layout(ParallelGroups& g, std::int64_t seq) {
  const ParallelConfig& p = g.plan();
  return TokenLayout(p.token_layout(), seq, g.tokens().size(), g.tokens().rank());
}

// The plan's stages, the model checked against them before any shard is allocated.
PipelineSplit checked_stages(const ParallelConfig& p, const ModelConfig& config) {
  check_pipeline_model(p, config);
  return stage_layers(p, config.num_hidden_layers);
}

// The rank's gradient shards, zeroed: fp32, or bf16 under --grad-reduce-dtype bf16.
ModelTensors allocate_gradients(const ModelConfig& config, const std::vector<ShardSpec>& specs,
                                MemoryTracker& tracker, const Precision& precision) {
  return allocate_sharded(config, specs, tracker, MemCategory::Gradients,
                          precision.reduces_gradients_in_bf16() ? DType::BF16 : DType::F32);
}

// Element `offset` of a gradient tensor of either dtype, as a buffer of `count` elements.
comm::Buffer gradient_slice(Tensor& t, std::int64_t offset, std::int64_t count) {
  auto* base = static_cast<std::byte*>(t.raw());
  const auto size = static_cast<std::int64_t>(dtype_size(t.dtype()));
  return comm::Buffer(base == nullptr ? nullptr : base + offset * size, count, t.dtype());
}

double sum_of_squares(Tensor& t, std::int64_t offset, std::int64_t count) {
  if (t.dtype() == DType::BF16) return kernels::sum_of_squares(count, t.data<bf16>() + offset);
  return kernels::sum_of_squares(count, float_at(t.f32(), offset));
}

// The strategy's specs with every other stage's tensors made empty blocks: this rank
// allocates, initialises, reduces and steps only its own stage's.
std::vector<ShardSpec> keep_stage_tensors(std::vector<ShardSpec> specs,
                                          const PipelineSplit& stages, int stage) {
  for (ShardSpec& s : specs) {
    s.on_stage = stage_of_tensor(s.name, stages) == stage;
    if (!s.on_stage) s.local = Shape{0};
  }
  return specs;
}
}  // namespace

RankModel::RankModel(const ModelConfig& config, ParallelGroups& groups, std::int64_t seq,
                     Recompute recompute, MemoryTracker& tracker, std::uint64_t seed,
                     const Precision& precision)
    : RankModel(config, groups, seq, recompute, tracker, seed,
                (check_training_precision(precision, groups.plan(), config),
                 make_strategy(config, groups)),
                precision) {}

RankModel::RankModel(const ModelConfig& config, ParallelGroups& groups, std::int64_t seq,
                     Recompute recompute, MemoryTracker& tracker, std::uint64_t seed,
                     Strategy strategy, const Precision& precision)
    : config_((validate(config), check_training_precision(precision, groups.plan(), config),
               config)),
      groups_(groups),
      tracker_(tracker),
      layout_(make_layout(groups, seq)),
      stages_(checked_stages(groups.plan(), config_)),
      stage_(groups.plan().pp > 1 ? groups.pp().rank() : 0),
      specs_(keep_stage_tensors(std::move(strategy.specs), stages_, stage_)),
      bf16_(precision.computes_in_bf16()),
      // Under bf16 the fp32 parameters are the optimizer's master copy (core/precision.h).
      params_(allocate_sharded(config_, specs_, tracker,
                               bf16_ ? MemCategory::OptimizerState : MemCategory::Parameters)),
      grads_(allocate_gradients(config_, specs_, tracker, precision)),
      staged_(undefined_like(grads_)),
      staging_(precision.reduces_gradients_in_bf16()
                   ? std::optional<GradientStaging>(std::in_place, staged_, grads_, tracker)
                   : std::nullopt),
      ops_(strategy.make_ops(config_, groups, layout_, params_, written_gradients(), tracker)),
      driver_(config_, params_, written_gradients(), *ops_, tracker, recompute) {
  if (seq > config_.max_position_embeddings)
    throw ConfigError(fmt::format("sequence length {} exceeds max_position_embeddings {}", seq,
                                  config_.max_position_embeddings));
  initialize_sharded(params_, specs_, config_, seed);
  if (staging_) driver_.set_gradient_staging(&*staging_);
  if (bf16_) {
    compute_ = allocate_compute_copy(params_, tracker_);
    refresh_compute_weights();
    ops_->set_compute_weights(&compute_);
  }
}

void RankModel::refresh_compute_weights() {
  if (bf16_) refresh_compute_copy(params_, compute_);
}

LocalBatch RankModel::localize(const TokenBatch& b) const {
  ORIGAMI_CHECK(b.seq == layout_.seq(), "a batch of {}-token sequences on a layout of {} tokens",
                b.seq, layout_.seq());
  for (std::int64_t i = 0; i < b.batch * b.seq; ++i) {
    ORIGAMI_CHECK(b.input_ids[i] >= 0 && b.input_ids[i] < config_.vocab_size,
                  "token id {} at position {} is outside the vocabulary [0, {})", b.input_ids[i], i,
                  config_.vocab_size);
    ORIGAMI_CHECK(b.labels[i] == kernels::kIgnoreLabel ||
                      (b.labels[i] >= 0 && b.labels[i] < config_.vocab_size),
                  "label {} at position {} is outside the vocabulary [0, {}) and is not the "
                  "ignore label",
                  b.labels[i], i, config_.vocab_size);
  }
  check_documents(b, config_.max_position_embeddings);
  // Balanced: this micro-batch's own assignment, from its whole rows (the same on every rank).
  const bool balanced = layout_.kind() == TokenLayoutKind::Balanced;
  std::optional<TokenLayout> own;
  if (balanced)
    own = TokenLayout::balanced_for(layout_.seq(), layout_.degree(), layout_.rank(), b.documents,
                                    b.batch);
  const TokenLayout& layout = balanced ? *own : layout_;
  LocalBatch local{b.batch, layout.slice(b.input_ids, b.batch), layout.slice(b.labels, b.batch)};
  if (b.documents != nullptr) {
    local.documents = layout.slice(b.documents, b.batch);
    local.positions = layout.slice(b.positions, b.batch);
    local.row_documents.assign(b.documents, b.documents + b.batch * b.seq);
  }
  if (balanced) {
    local.token_positions = layout.positions();
    for (int r = 0; r < layout.degree(); ++r)
      for (const std::int64_t p : layout.positions_of(r)) local.kv_positions.push_back(p);
  }
  return local;
}

RankModel::Accumulated RankModel::accumulate(const std::vector<LocalBatch>& micro,
                                             double grad_scale) {
  // Pipeline stages: this stage's share of the aux and the load (sum_over_stages adds them).
  if (groups_.plan().pp > 1) return accumulate_stage(micro, grad_scale);
  Accumulated r;
  const double aux_weight = 1.0 / static_cast<double>(std::max<std::size_t>(1, micro.size()));
  ops_->set_pass(0);
  for (const LocalBatch& b : micro) {
    r.loss_sum += run(b, true, grad_scale, aux_weight).sum;
    r.aux += aux_weight * router_aux_loss();
    r.moe.add(moe_load());
  }
  return r;
}

kernels::LossSum RankModel::run(const LocalBatch& batch, bool backward, double grad_scale,
                                double aux_weight) {
  ops_->set_batch(&batch);
  ops_->set_aux_weight(aux_weight);
  const kernels::LossSum loss = driver_.run(backward, grad_scale);
  ops_->set_batch(nullptr);
  return loss;
}

std::int64_t RankModel::global_unmasked(const std::vector<LocalBatch>& micro) {
  std::int64_t n = 0;
  for (const LocalBatch& b : micro)
    for (std::int32_t l : b.labels) n += l != kernels::kIgnoreLabel;
  std::vector<std::int64_t> v{n};
  // Group: token axis x dp (the tp ranks hold copies of the same labels: not summed over tp).
  groups_.tokens().all_reduce(v, v);
  groups_.dp().all_reduce(v, v);
  return v[0];
}

double RankModel::global_loss_sum(double local) {
  std::vector<double> v{local};
  groups_.tokens().all_reduce(v, v);  // group: token axis x dp, as the count
  groups_.dp().all_reduce(v, v);
  // Only the last stage computes a loss (every stage counts the same labels: no pp sum there).
  if (groups_.plan().pp > 1) groups_.pp().all_reduce(v, v);
  return v[0];
}

void RankModel::sum_over_stages(Accumulated& acc) {
  if (groups_.plan().pp <= 1 || !config_.is_moe()) return;
  // Every rank of a stage holds its stage's aux and load alike (the balance's counts are the
  // job's, reduced over the token axis and dp): summed over pp only, each stage's layers once.
  const auto E = static_cast<std::size_t>(config_.num_local_experts);
  MoeLoad& load = acc.moe;
  if (load.tokens_per_expert.empty()) load.tokens_per_expert.assign(E, 0);
  std::vector<double> v{acc.aux, static_cast<double>(load.dropped)};  // counts exact below 2^53
  v.insert(v.end(), load.tokens_per_expert.begin(), load.tokens_per_expert.end());
  groups_.pp().all_reduce(v, v);
  acc.aux = v[0];
  load.dropped = std::llround(v[1]);
  for (std::size_t e = 0; e < E; ++e) load.tokens_per_expert[e] = std::llround(v[2 + e]);
}

void RankModel::reduce_gradients(const OptimizerSlices* dp_slices) {
  const dryrun::MessagesAt as_sent(dryrun::MessageElement::Gradient);  // fp32 or bf16
  std::vector<NamedTensor> g = named_tensors(grads_);
  for (std::size_t i = 0; i < g.size(); ++i) {
    Tensor& t = *g[i].tensor;
    // Another stage's, or another rank's whole expert (every rank of the groups skips it).
    if (!specs_[i].on_stage || t.numel() == 0) continue;
    // The groups are stated per tensor by assign_reduction_axes (registry.h).
    bool scattered = false;  // dp done as a reduce-scatter: later axes reduce the slice only
    for (const std::string& axis : specs_[i].grad_sum_axes) {
      comm::Communicator& c = groups_.axis(axis);
      if (dp_slices == nullptr) {
        c.all_reduce(t, t);
        continue;
      }
      const comm::Buffer slice = gradient_slice(t, dp_slices->offset[i], dp_slices->count[i]);
      if (axis == "dp") {
        c.reduce_scatter(t, slice);  // in place: the output is this rank's block of t
        scattered = true;
      } else {
        c.all_reduce(scattered ? slice : comm::Buffer(t), scattered ? slice : comm::Buffer(t));
      }
    }
  }
}

double RankModel::grad_norm(const OptimizerSlices* dp_slices) {
  // Squares grouped by the axes they are summed over (assign_reduction_axes): sharded tensors
  // over their weight axis, replicated ones (RMSNorm weights) over nothing, i.e. counted once.
  // Sharded optimizer: each dp rank adds its slices' squares, summed over dp as well.
  std::map<std::vector<std::string>, double> squares;
  std::vector<NamedTensor> g = named_tensors(grads_);
  const bool sliced = dp_slices != nullptr && groups_.dp().size() > 1;
  // A kv block held by several replicas adds its squares on the first of them only.
  for (std::size_t i = 0; i < g.size(); ++i) {
    std::vector<std::string> axes = specs_[i].norm_sum_axes;
    if (sliced) axes.push_back("dp");
    const std::int64_t off = dp_slices != nullptr ? dp_slices->offset[i] : 0;
    const std::int64_t n = dp_slices != nullptr ? dp_slices->count[i] : g[i].tensor->numel();
    squares[axes] += specs_[i].norm_counted ? sum_of_squares(*g[i].tensor, off, n) : 0.0;
  }
  double total = 0;
  for (auto& [axes, sq] : squares) {
    std::vector<double> v{sq};
    for (const std::string& axis : axes) groups_.axis(axis).all_reduce(v, v);
    total += v[0];
  }
  if (groups_.plan().pp > 1) {  // every stage's squares (off-stage tensors added nothing)
    std::vector<double> v{total};
    groups_.pp().all_reduce(v, v);
    total = v[0];
  }
  return std::sqrt(total);
}

std::vector<Tensor> RankModel::gather(ModelTensors& tensors, MemoryTracker& into) {
  std::vector<Tensor> out;
  std::vector<NamedTensor> named = named_tensors(tensors);
  for (std::size_t i = 0; i < named.size(); ++i) {
    const ShardSpec& s = specs_[i];
    Tensor widened;  // a bf16 gradient's shard in fp32 (exact)
    if (named[i].tensor->dtype() == DType::BF16) {
      const Tensor& b = *named[i].tensor;
      widened = Tensor(into, MemCategory::Workspace, b.shape());
      if (b.backed() && widened.backed())
        kernels::convert_to_float(b.numel(), b.data<bf16>(), widened.f32());
    }
    Tensor& shard = widened.defined() ? widened : *named[i].tensor;
    out.push_back(s.on_stage ? gather_full(s, shard, groups_.axis(s.shard_axis), into)
                             : Tensor(into, MemCategory::Workspace, s.global));
    // The tensor's stage holds it whole now; the other stages receive it.
    if (groups_.plan().pp > 1) groups_.pp().broadcast(out.back(), stage_of_tensor(s.name, stages_));
  }
  return out;
}

}  // namespace origami::parallel
