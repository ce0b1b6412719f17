#include "origami/model/recompute.h"

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami {

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::None;
  if (name == "mlp") return Recompute::Mlp;
  if (name == "full") return Recompute::Full;
  throw ConfigError(fmt::format("unknown recompute policy '{}'; use none, mlp or full", name));
}

std::string recompute_name(Recompute r) {
  switch (r) {
    case Recompute::None:
      return "none";
    case Recompute::Mlp:
      return "mlp";
    case Recompute::Full:
      return "full";
  }
  return "?";
}

}  // namespace origami
