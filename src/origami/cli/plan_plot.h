// `origami plan --plot FILE`: per-device memory against sequence length, one line per strategy
// (its best layout at each length), the device's memory as a horizontal line; gnuplot PNG.
#pragma once

#include <string>

#include "origami/plan/hardware.h"
#include "origami/plan/cost_model.h"

namespace origami::cli {

// Writes FILE.dat and FILE.gp beside FILE and runs gnuplot; ConfigError if it cannot.
void plot_memory_vs_sequence(const ModelConfig& m, int world, const plan::Workload& w,
                             const plan::Hardware& hw, const std::string& png);

}  // namespace origami::cli
