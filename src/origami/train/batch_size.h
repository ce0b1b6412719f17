// The batch convention, Megatron's and torchtitan's: --batch (--micro-batch) is the micro-batch
// of EACH data-parallel replica, and an optimizer step takes
//   global batch = micro-batch x dp x grad-accum
// sequences. --global-batch is the other way to say it; a resumed run under another dp keeps
// the saved global batch. Both resolutions change only what the user did not fix.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "origami/train/trainer.h"

namespace origami {

// Resolves o.global_batch (0: not given) against o.batch and o.grad_accum for `dp` replicas:
// derives the one not fixed (the micro-batch when neither is: grad-accum stays), or refuses
// (ConfigError naming the flags and a value that works) a contradiction or a split that is
// not whole. On return o.global_batch == o.batch * dp * o.grad_accum. Returns a sentence
// saying what it derived ("" when nothing).
std::string resolve_global_batch(TrainOptions& o, int dp);

// The saved run's global batch (checkpoint index "run"; checkpoints from before the
// per-replica convention stored the whole job's micro-batch as "batch": times grad_accum).
std::int64_t saved_global_batch(const nlohmann::json& run);

// A resumed run (checkpoint `dir`, index field `run`) under `dp` replicas keeps the saved
// global batch: when o's differs, grad-accum is adjusted (or else the micro-batch) if the user
// did not fix it and the saved batch splits; otherwise ConfigError saying why and what works.
// Returns a sentence saying what it changed ("" when nothing). o.global_batch must be resolved.
std::string keep_saved_global_batch(TrainOptions& o, int dp, const nlohmann::json& run,
                                    const std::string& dir);

}  // namespace origami
