// The TSP degrees the inference engine serves (infer/engine.h), stated below both the engine
// and the planner (plan/inference.h) so that each refuses a degree in the same words.
#pragma once

#include "origami/model/config.h"

namespace origami::parallel {

// Refuses (ConfigError) a TSP degree the engine cannot serve: one check_tensor_split refuses,
// or one above the kv heads (replicated kv heads are built for training only: the KV cache
// kept by head group would then be duplicated on every replica, and decode is not checked
// for it). The message names the degree that works.
void check_inference_degree(const ModelConfig& config, int degree);

}  // namespace origami::parallel
