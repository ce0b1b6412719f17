// The Llama model's tensors, named as Hugging Face names them, and the list view every
// generic piece (initialisation, optimizer, gradient norm, checkpoints, tests) iterates over.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "origami/core/tensor.h"
#include "origami/model/config.h"

namespace origami {

// One SwiGLU expert of a mixture-of-experts layer (the dense MLP's three matrices, Mixtral's
// w1 = gate, w3 = up, w2 = down).
struct ExpertTensors {
  Tensor w_gate;  // [f, h]
  Tensor w_up;    // [f, h]
  Tensor w_down;  // [h, f]
};

struct LayerTensors {
  Tensor input_norm;  // [h]
  Tensor wq;          // [H*d, h]   (nn.Linear layout: [out, in])
  Tensor wk;          // [Hkv*d, h]
  Tensor wv;          // [Hkv*d, h]
  Tensor wo;          // [h, H*d]
  Tensor post_norm;   // [h]
  Tensor w_gate;      // [f, h]
  Tensor w_up;        // [f, h]
  Tensor w_down;      // [h, f]
  // Mixture of experts (ModelConfig::is_moe()): the router and the E experts replace the
  // dense w_gate, w_up and w_down, which are then left undefined.
  Tensor router;  // [E, h]
  std::vector<ExpertTensors> experts;
};

// One set of model-shaped tensors: the parameters, or their gradients, or an optimizer moment.
// Tied embeddings (ModelConfig::tie_word_embeddings): lm_head is left undefined and the head
// uses embed, so the table exists once and the head's dW and the embedding's scatter-add
// accumulate into the one gradient (each strategy shards embed and head alike: shard_spec.h).
struct ModelTensors {
  Tensor embed;  // [V, h]
  std::vector<LayerTensors> layers;
  Tensor final_norm;  // [h]
  Tensor lm_head;     // [V, h]; undefined when tied
  bool tied = false;

  // The LM head's matrix: lm_head, or the shared embed when tied.
  Tensor& head() { return tied ? embed : lm_head; }
  const Tensor& head() const { return tied ? embed : lm_head; }
};

// A named view of one tensor of a ModelTensors.
struct NamedTensor {
  std::string name;  // Hugging Face name, e.g. "model.layers.0.self_attn.q_proj.weight"
  Tensor* tensor;
  bool is_norm;  // RMSNorm weight: initialised to 1, no weight decay
};

// Allocates every tensor of the model, zeroed, under `category`.
ModelTensors allocate_model_tensors(const ModelConfig& config, MemoryTracker& tracker,
                                    MemCategory category);

// Zeroed tensors with the shapes of `like` (a sharded model's local shapes), under `category`,
// of `dtype` (bf16: the gradients under --grad-reduce-dtype bf16).
ModelTensors allocate_like(ModelTensors& like, MemoryTracker& tracker, MemCategory category,
                           DType dtype = DType::F32);
// The structure of `like` (its layers and experts, tied or not) with every tensor undefined.
ModelTensors undefined_like(const ModelTensors& like);

// Every tensor in a fixed order (embedding, layers in order, final norm, head; no head when
// tied: the shared table is listed, stepped, reduced and saved once, as embed_tokens). A
// mixture-of-experts layer lists, after its post-attention norm, Mixtral's names:
// block_sparse_moe.gate.weight (the router), then experts.M.w1 / w3 / w2 (gate / up / down)
// for M = 0 .. E-1.
std::vector<NamedTensor> named_tensors(ModelTensors& tensors);

// Deterministic initialisation: matrices ~ N(0, initializer_range^2) keyed by (seed, name,
// global index), norms = 1.
void initialize_parameters(ModelTensors& params, const ModelConfig& config, std::uint64_t seed);

void zero_tensors(ModelTensors& tensors);

}  // namespace origami
