// What one device would need for the same run, measured (not estimated): the engine's
// single-device layout (RankModel on a world of one) with the same config, recompute policy,
// precision and optimizer runs one forward+backward of
// options.batch sequences (the caller passes the job's micro-batch: every dp replica's) on its
// own tracker. The parallel loop prints it beside every rank's
// peaks (TSP's closing memory report).
#pragma once

#include "origami/core/memory_tracker.h"
#include "origami/data/dataset.h"
#include "origami/train/trainer.h"

namespace origami {

MemoryStats one_device_memory(const TrainOptions& options, const data::TokenDataset& dataset);

}  // namespace origami
