// What the model tests share: the tiny preset at 128 positions and the relative difference of
// two tensors (the L2 norm of a - b over that of b).
#pragma once

#include <cmath>
#include <cstdint>

#include "origami/core/tensor.h"
#include "origami/model/config.h"

namespace origami::model_test {

inline ModelConfig tiny() {
  ModelConfig c = model_preset("tiny");
  c.max_position_embeddings = 128;
  return c;
}

inline double relative_difference(const Tensor& a, const Tensor& b) {
  double diff = 0, ref = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    diff += std::pow(double(a.f32()[i]) - b.f32()[i], 2);
    ref += std::pow(double(b.f32()[i]), 2);
  }
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

}  // namespace origami::model_test
