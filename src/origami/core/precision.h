// Element sizes by kind of tensor: the precision profile of a run. The engine computes in
// fp32 today; the dry run (docs/design.md §10) and the planner account bytes with a profile, so that
// a bf16 run's memory and traffic are measurable without bf16 kernels.
#pragma once

#include <cstdint>
#include <string>

#include "origami/core/memory_tracker.h"

namespace origami {

struct Precision {
  std::string name = "fp32";
  std::int64_t parameters = 4;     // the weights the kernels read
  std::int64_t master = 0;         // an extra fp32 copy kept by the optimizer (0: none),
                                   // accounted as optimizer state
  std::int64_t gradients = 4;      // weight gradients (and their accumulators)
  std::int64_t moments = 4;        // each of AdamW's two moments
  std::int64_t activations = 4;    // saved activations and workspace
  std::int64_t communication = 4;  // every element a transfer moves
  std::int64_t logits = 4;         // the LM head's logits blocks (softmax in fp32)

  // Everything in fp32 (what the engine computes in).
  static Precision fp32();
  // Mixed precision: bf16 weights, activations and communication; fp32 master weights,
  // gradients, Adam moments and logits.
  static Precision bf16();
  // "fp32" | "bf16"; ConfigError naming the known profiles otherwise.
  static Precision parse(const std::string& name);

  // Optimizer-state bytes per parameter: the master copy plus two moments.
  std::int64_t optimizer_per_parameter() const { return master + 2 * moments; }

  // Makes `tracker` account the engine's fp32 tensors with this profile's sizes per category
  // (the dry run): parameters, gradients, optimizer state (master + 2 moments over AdamW's two
  // state tensors), activations and workspace, communication buffers, logits.
  void apply_to(MemoryTracker& tracker) const;
};

}  // namespace origami
