// A device mesh with named axes over a world communicator, parsed from "dp=2,tsp=4" or
// "dp=1,tp=2,sp=2". Ranks are laid out row-major: the last axis varies fastest, so with
// "dp=2,tsp=4" world ranks 0-3 form the tsp group of dp coordinate 0. Constructing the mesh
// is collective over the world (one split per axis, in axis order); each rank then holds the
// communicator of every axis (named after the axis).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "origami/comm/communicator.h"

namespace origami::comm {

struct MeshAxis {
  std::string name;
  int size = 1;
};

// Throws ConfigError for a malformed spec (empty, missing '=', bad name or size, duplicates).
std::vector<MeshAxis> parse_mesh(std::string_view spec);

class DeviceMesh {
 public:
  // Throws ConfigError if the axes do not multiply to world.size() (before any communication).
  DeviceMesh(Communicator world, std::string_view spec);

  const std::vector<MeshAxis>& axes() const { return axes_; }
  int axis_size(std::string_view axis) const;
  int coord(std::string_view axis) const;  // this rank's coordinate on the axis
  Communicator& axis(std::string_view axis);
  Communicator& world() { return world_; }
  std::string spec() const;

 private:
  int index(std::string_view axis) const;
  Communicator world_;
  std::vector<MeshAxis> axes_;
  std::vector<int> coords_;
  std::vector<Communicator> comms_;
};

}  // namespace origami::comm
