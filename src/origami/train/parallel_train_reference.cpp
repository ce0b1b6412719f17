#include "origami/train/parallel_train_reference.h"

#include "origami/model/llama.h"
#include "origami/model/optimizer.h"

namespace origami {

MemoryStats one_device_memory(const TrainOptions& o, const data::TokenDataset& dataset) {
  MemoryTracker tracker("one device");
  LlamaModel model(model_for_run(o.model, o.seq), tracker, o.seed, parse_recompute(o.recompute));
  // The optimizer's moments are allocated up front; no step is taken.
  const AdamW optimizer(o.model, tracker,
                        {.lr = o.lr,
                         .beta1 = o.beta1,
                         .beta2 = o.beta2,
                         .eps = 1e-8f,
                         .weight_decay = o.weight_decay});
  data::BatchSampler sampler(dataset, o.seed);
  const data::Batch b = sampler.next_batch(o.batch, o.seq, tracker);
  const TokenBatch batch{o.batch, o.seq, b.input_ids.data<std::int32_t>(),
                         b.labels.data<std::int32_t>()};
  const std::int64_t n = count_unmasked(batch);
  model.forward_backward(batch, n > 0 ? 1.0 / static_cast<double>(n) : 0.0);
  return tracker.stats();
}

}  // namespace origami
