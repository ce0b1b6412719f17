// The training loops' two call sites for checkpoints: before the first step (--init-from,
// --resume or the newest complete checkpoint of --save-dir) and after each step (--save-dir,
// --save-every). The same calls serve the single-device loop (world = null) and every
// parallel strategy: a rank describes what it holds by its ShardSpecs.
#pragma once

#include <cstdint>
#include <string>

#include "origami/checkpoint/checkpoint.h"
#include "origami/train/save_dir_lock.h"
#include "origami/train/trainer.h"

namespace origami::ckpt {

// Collective, before any allocation: world rank 0 checks --save-dir (a writable folder) and
// locks it for the run, and removes the partial files interrupted saves left there; the other
// ranks hold nothing, and all of them fail together. Without --save-dir: holds nothing.
SaveDirLock open_save_dir(const TrainOptions& options, comm::Communicator* world, const Log& log);

// Collective. Loads what the options ask for into `state` and returns the number of steps
// already taken (0 for a fresh run or --init-from). A resumed run must draw the same batches:
// its seed, global batch (resolved: options.global_batch), seq and data order must equal the
// checkpoint's (ConfigError otherwise); the split of the global batch may differ.
std::int64_t begin_run(const TrainOptions& options, comm::Communicator* world,
                       const RankState& state, const Log& log);

// Collective, at every step boundary. Saves after `step` when it is a multiple of
// --save-every or the last step, or when any rank received a stop signal (preemption.h):
// then, saved, it removes partial files and throws Preempted on every rank. `layout`
// describes the saving layout (e.g. the plan's description) for the index.
void after_step(const TrainOptions& options, comm::Communicator* world, const RankState& state,
                std::int64_t step, const std::string& layout, const Log& log);

// Collective. Writes the checkpoint of `step` with its run state, and logs where.
void save_step(const TrainOptions& options, comm::Communicator* world, const RankState& state,
               std::int64_t step, const std::string& layout, const Log& log);

}  // namespace origami::ckpt
