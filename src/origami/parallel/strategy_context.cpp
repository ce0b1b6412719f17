#include "origami/parallel/strategy_context.h"

namespace origami::parallel {

StrategyContext::StrategyContext(const ModelConfig& config, ParallelGroups& groups,
                                 const TokenLayout& layout, ModelTensors& params,
                                 ModelTensors& grads, MemoryTracker& tracker)
    : config_(config),
      groups_(groups),
      layout_(layout),
      params_(params),
      grads_(grads),
      tracker_(tracker),
      rope_(make_rope_tables(config, tracker)) {
  ORIGAMI_CHECK(layout.degree() == groups.tokens().size(),
                "token layout over {} ranks on a token axis of {}", layout.degree(),
                groups.tokens().size());
  for (int r = 0; r < layout.degree(); ++r)
    for (std::int64_t p : layout.positions_of(r)) kv_positions_.push_back(p);
}

const std::int64_t* StrategyContext::query_positions() const {
  return batch_ != nullptr && !batch_->token_positions.empty() ? batch_->token_positions.data()
                                                               : layout_.positions().data();
}

const std::vector<std::int64_t>& StrategyContext::key_positions() const {
  return batch_ != nullptr && !batch_->kv_positions.empty() ? batch_->kv_positions
                                                            : kv_positions_;
}

void StrategyContext::check_batch_shape(const LocalBatch* batch) const {
  if (batch == nullptr) return;
  ORIGAMI_CHECK(
      batch->batch >= 1 &&
          static_cast<std::int64_t>(batch->ids.size()) == batch->batch * layout_.local_seq() &&
          batch->labels.size() == batch->ids.size(),
      "a local batch must hold batch x {} ids and labels", layout_.local_seq());
}

}  // namespace origami::parallel
