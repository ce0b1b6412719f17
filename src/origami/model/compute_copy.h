// Training's bf16 compute copy (core/precision.h, "Training under --precision bf16"): the
// matrices of the fp32 master parameters rounded to bf16, which every linear's forward and
// backward products read, refreshed from the master after each optimizer step. The master
// stays what the optimizer, the checkpoints and the norms read.
#pragma once

#include "origami/core/memory_tracker.h"
#include "origami/model/weights.h"

namespace origami {

// The copy's tensors, zeroed: a bf16 tensor under MemCategory::Parameters for each matrix of
// `master` (the embedding, W_Q/W_K/W_V/W_O, W_gate/W_up/W_down, an untied LM head); the norms'
// weights are left undefined (read from the master in fp32). ConfigError for a mixture of
// experts, whose router and experts have no bf16 path yet.
ModelTensors allocate_compute_copy(ModelTensors& master, MemoryTracker& tracker);

// compute = bf16(master), rounding to nearest even, matrix by matrix (nothing where either side
// is unbacked: the dry run).
void refresh_compute_copy(ModelTensors& master, ModelTensors& compute);

}  // namespace origami
