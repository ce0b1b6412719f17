#include "origami/train/parallel_train_reference.h"

#include "origami/comm/run_ranks.h"
#include "origami/model/llama.h"
#include "origami/parallel/rank_model.h"
#include "origami/parallel/registry.h"
#include "origami/train/rank_step.h"

namespace origami {

MemoryStats one_device_memory(const TrainOptions& o, const data::TokenDataset& dataset) {
  MemoryStats out;
  // The engine's single-device layout on a world of one (its own threads-transport rank and
  // tracker), in the run's precision.
  comm::run_ranks(1, [&](comm::Communicator& world) {
    MemoryTracker& tracker = world.tracker();
    parallel::ParallelGroups groups(world, parallel::make_parallel_config("single", 1, "", false,
                                                                          parallel::TokenLayoutKind::Contiguous));
    parallel::RankModel model(model_for_run(o.model, o.seq), groups, o.seq,
                              parse_recompute(o.recompute), tracker, o.seed,
                              Precision::parse(o.precision, o.grad_reduce_dtype));
    // The optimizer's moments are allocated up front; no step is taken.
    const AdamW optimizer = parallel::make_rank_optimizer(model, tracker,
                                                          {.lr = o.lr,
                                                           .beta1 = o.beta1,
                                                           .beta2 = o.beta2,
                                                           .eps = 1e-8f,
                                                           .weight_decay = o.weight_decay},
                                                          false);
    data::BatchSampler sampler(dataset, o.seed);
    const data::Batch b = sampler.next_batch(o.batch, o.seq, tracker);
    const TokenBatch batch{o.batch, o.seq, b.input_ids.data<std::int32_t>(),
                           b.labels.data<std::int32_t>()};
    const std::int64_t n = count_unmasked(batch);
    model.run(model.localize(batch), true, n > 0 ? 1.0 / static_cast<double>(n) : 0.0);
    out = tracker.stats();
  });
  return out;
}

}  // namespace origami
