// The TSP degrees the inference engine serves (infer/engine.h), stated below both the engine
// and the planner (plan/inference.h) so that each refuses a degree in the same words.
#pragma once

#include "origami/model/config.h"

namespace origami::parallel {

// Refuses (ConfigError) a TSP degree the engine cannot serve: the training rule of
// check_tensor_split (the degree divides the heads and the MLP width, and divides the kv heads
// or is a multiple of them). Above the kv heads each kv head is replicated over degree / Hkv
// ranks, and each replica keeps that head's KV cache (docs/inference.md, "Kv heads
// replicated"). The message names the largest degree that works.
void check_inference_degree(const ModelConfig& config, int degree);

}  // namespace origami::parallel
