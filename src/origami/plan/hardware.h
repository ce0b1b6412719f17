// Hardware presets for the planner's fit and step-time estimates (docs/planner.md, "Hardware
// presets", states each figure's source). Every field can be overridden by `origami plan`
// flags; the presets are starting points, not measurements of the user's cluster.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "origami/core/precision.h"

namespace origami::plan {

// One link class: a message of b bytes over one hop costs alpha + b / beta seconds.
struct Link {
  double alpha_s = 0;     // per-message latency
  double beta_Bps = 1;    // bytes per second per device, one direction
  double seconds(double bytes, double messages) const { return messages * alpha_s + bytes / beta_Bps; }
};

struct Hardware {
  std::string name, description;
  std::int64_t memory_bytes = 0;  // per device
  double peak_flops_fp32 = 0;     // per device, dense
  double peak_flops_bf16 = 0;
  double achievable = 1;          // fraction of the peak a training step's GEMMs reach
  double memory_bw_Bps = 1;       // device memory bandwidth (bounds decode: weights are read)
  Link intra, inter;              // within a node / between nodes
  int devices_per_node = 1;
  // Runtime overhead per device not seen by the engine's tracker: the runtime context, the
  // collective library's buffers, allocator slack (stated separately in every row).
  std::int64_t runtime_overhead_bytes = 0;
  std::string sources;

  // Achievable FLOP/s per device for a precision profile ("fp32" uses the fp32 peak, "bf16"
  // the bf16 one).
  double flops_per_s(const Precision& p) const;
};

// "mi300x", "h100", "h200", "cpu"; ConfigError listing the known presets otherwise. The
// inter-node link of the GPU presets is the typical fabric (400 Gb/s per device).
Hardware hardware_preset(const std::string& name);
std::vector<std::string> hardware_preset_names();

}  // namespace origami::plan
