#include "origami/parallel/inference_degree.h"

#include "origami/parallel/layout.h"

namespace origami::parallel {

void check_inference_degree(const ModelConfig& config, int degree) {
  check_tensor_split(config, degree, "tsp");
}

}  // namespace origami::parallel
