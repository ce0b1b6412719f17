#include "origami/comm/link_model.h"

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::comm {

std::chrono::nanoseconds LinkModel::hop_time(int world_src, int world_dst, std::int64_t bytes) const {
  if (!enabled) return std::chrono::nanoseconds(0);
  const double s = hop_seconds(world_src, world_dst, bytes);
  return std::chrono::nanoseconds(static_cast<std::int64_t>(s * 1e9));
}

double LinkModel::hop_seconds(int world_src, int world_dst, std::int64_t bytes) const {
  const bool intra = same_node(world_src, world_dst);
  const double alpha = intra ? intra_alpha_s : inter_alpha_s;
  const double beta = intra ? intra_beta_Bps : inter_beta_Bps;
  return alpha + static_cast<double>(bytes) / beta;
}

std::string LinkModel::describe() const {
  if (!enabled) return "link model off";
  return fmt::format("link model: intra-node alpha {:.3g} s beta {:.3g} B/s, inter-node alpha {:.3g} s "
                     "beta {:.3g} B/s, {} devices per node",
                     intra_alpha_s, intra_beta_Bps, inter_alpha_s, inter_beta_Bps, devices_per_node);
}

void LinkModel::validate() const {
  if (!enabled) return;
  if (intra_alpha_s < 0 || inter_alpha_s < 0 || !(intra_beta_Bps > 0) || !(inter_beta_Bps > 0) ||
      devices_per_node < 1) {
    throw ConfigError("invalid " + describe() +
                      ": alphas must be >= 0, betas > 0 and devices_per_node >= 1");
  }
}

}  // namespace origami::comm
