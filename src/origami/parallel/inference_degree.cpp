#include "origami/parallel/inference_degree.h"

#include <numeric>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/parallel/layout.h"

namespace origami::parallel {

void check_inference_degree(const ModelConfig& config, int degree) {
  check_tensor_split(config, degree, "tsp");
  if (kv_replicas(config, degree) == 1) return;
  throw ConfigError(fmt::format(
      "tsp degree {} exceeds the number of key/value heads (num_key_value_heads, {}): "
      "inference does not replicate kv heads (training does); use a degree of at most {} "
      "that divides the heads",
      degree, config.num_key_value_heads,
      largest_divisor_at_most(
          std::gcd(config.num_key_value_heads,
                   std::gcd(config.num_attention_heads, config.intermediate_size)),
          degree)));
}

}  // namespace origami::parallel
