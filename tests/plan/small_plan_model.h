// The planner tests' small model: h 64, 2 layers, 4 heads (= kv heads), MLP 128, vocabulary 96.
#pragma once

#include <cstdint>

#include "origami/model/config.h"

namespace origami::plan {

inline ModelConfig small_plan_model(std::int64_t max_positions = 64) {
  ModelConfig c;
  c.vocab_size = 96;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 4;
  c.max_position_embeddings = max_positions;
  return c;
}

}  // namespace origami::plan
