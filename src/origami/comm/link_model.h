// Optional link model: each hop takes at least alpha + bytes / beta on the class of link it
// crosses (intra-node when both world ranks sit on the same node of devices_per_node
// consecutive ranks, inter-node otherwise). Transports delay the completion of a message to
// that time (they do not busy-wait), so overlap and topology effects can be measured on a
// CPU. Off by default.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace origami::comm {

struct LinkModel {
  bool enabled = false;
  double intra_alpha_s = 5e-6;
  double intra_beta_Bps = 100e9;
  double inter_alpha_s = 20e-6;
  double inter_beta_Bps = 25e9;
  int devices_per_node = 8;

  bool same_node(int world_a, int world_b) const {
    return world_a / devices_per_node == world_b / devices_per_node;
  }
  // Minimum duration of one hop between two world ranks (zero when disabled).
  std::chrono::nanoseconds hop_time(int world_src, int world_dst, std::int64_t bytes) const;
  // alpha + bytes / beta of the link class between the two ranks, in seconds, whether or not
  // the model is enabled (the dry run's virtual clocks use it).
  double hop_seconds(int world_src, int world_dst, std::int64_t bytes) const;
  std::string describe() const;
  // Throws ConfigError if a value cannot work (beta <= 0, devices_per_node < 1, ...).
  void validate() const;
};

}  // namespace origami::comm
