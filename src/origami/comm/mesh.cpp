#include "origami/comm/mesh.h"

#include <cctype>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::comm {

std::vector<MeshAxis> parse_mesh(std::string_view spec) {
  std::vector<MeshAxis> axes;
  if (spec.empty()) throw ConfigError("empty mesh spec; expected e.g. \"dp=2,tsp=4\"");
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string_view item = spec.substr(pos, comma - pos);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      throw ConfigError(fmt::format("mesh spec \"{}\": \"{}\" is not of the form axis=size", spec, item));
    }
    MeshAxis a;
    a.name = std::string(item.substr(0, eq));
    for (char ch : a.name) {
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') {
        throw ConfigError(fmt::format("mesh spec \"{}\": axis name \"{}\" must be letters, digits or _", spec, a.name));
      }
    }
    const std::string num(item.substr(eq + 1));
    std::size_t used = 0;
    long v = 0;
    try {
      v = std::stol(num, &used);
    } catch (...) {
      used = 0;
    }
    if (num.empty() || used != num.size() || v < 1 || v > (1 << 20)) {
      throw ConfigError(fmt::format("mesh spec \"{}\": size \"{}\" of axis {} must be a positive integer", spec, num,
                                    a.name));
    }
    a.size = static_cast<int>(v);
    for (const auto& b : axes) {
      if (b.name == a.name) throw ConfigError(fmt::format("mesh spec \"{}\": axis {} appears twice", spec, a.name));
    }
    axes.push_back(std::move(a));
    pos = comma + 1;
  }
  return axes;
}

DeviceMesh::DeviceMesh(Communicator world, std::string_view spec) : world_(std::move(world)), axes_(parse_mesh(spec)) {
  long product = 1;
  for (const auto& a : axes_) product *= a.size;
  if (product != world_.size()) {
    throw ConfigError(fmt::format("mesh \"{}\" has {} devices (the product of its axis sizes) but the world has {} "
                                  "ranks; make the product equal the world size",
                                  spec, product, world_.size()));
  }
  // Row-major coordinates: the last axis varies fastest.
  const int n = static_cast<int>(axes_.size());
  coords_.assign(static_cast<std::size_t>(n), 0);
  std::vector<int> stride(static_cast<std::size_t>(n), 1);
  for (int i = n - 2; i >= 0; --i) stride[i] = stride[i + 1] * axes_[i + 1].size;
  const int r = world_.rank();
  for (int i = 0; i < n; ++i) coords_[i] = (r / stride[i]) % axes_[i].size;
  for (int i = 0; i < n; ++i) {
    // Ranks that differ only in axis i share a color: the rank with coordinate i zeroed.
    const int color = r - coords_[i] * stride[i];
    comms_.push_back(world_.split(color, coords_[i], axes_[i].name));
  }
}

int DeviceMesh::index(std::string_view axis) const {
  for (std::size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].name == axis) return static_cast<int>(i);
  }
  throw ConfigError(fmt::format("mesh \"{}\" has no axis named \"{}\"", spec(), axis));
}

int DeviceMesh::axis_size(std::string_view axis) const { return axes_[index(axis)].size; }
int DeviceMesh::coord(std::string_view axis) const { return coords_[index(axis)]; }
Communicator& DeviceMesh::axis(std::string_view axis) { return comms_[index(axis)]; }

std::string DeviceMesh::spec() const {
  std::string s;
  for (const auto& a : axes_) s += fmt::format("{}{}={}", s.empty() ? "" : ",", a.name, a.size);
  return s;
}

}  // namespace origami::comm
