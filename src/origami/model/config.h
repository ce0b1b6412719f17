// The model's shape, with the field names of a Hugging Face Llama config.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "origami/kernels/rope.h"  // RopeScaling

namespace origami {

struct ModelConfig {
  std::int64_t vocab_size = 256;
  std::int64_t hidden_size = 256;
  std::int64_t intermediate_size = 688;
  std::int64_t num_hidden_layers = 4;
  std::int64_t num_attention_heads = 4;
  std::int64_t num_key_value_heads = 4;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-5;
  std::int64_t max_position_embeddings = 4096;
  double initializer_range = 0.02;  // std of the normal initialisation of every matrix
  RopeScaling rope_scaling;         // none unless config.json's rope_scaling says otherwise
  // config.json's head_dim when it differs from hidden_size / num_attention_heads (Gemma-,
  // Qwen3-style: q_proj [heads * head_dim, h], o_proj [h, heads * head_dim]); 0 otherwise.
  // Every strategy and the inference engine shard q/k/v/o by heads of head_dim() values.
  std::int64_t explicit_head_dim = 0;
  // One shared [V, h] table for the embedding and the LM head (config.json's
  // tie_word_embeddings): the model holds model.embed_tokens.weight only and the head reads it
  // (ModelTensors::head(), docs/models.md "Tied embeddings").
  bool tie_word_embeddings = false;
  // Mixture-of-experts MLP (Mixtral's config.json names; docs/models.md "Mixture of experts"):
  // num_local_experts E > 0 replaces every layer's gated MLP by a router [E, h] and E SwiGLU
  // experts of intermediate_size each, of which each token uses num_experts_per_tok (k).
  // 0: the dense MLP. The auxiliary load-balancing loss is added with router_aux_loss_coef.
  std::int64_t num_local_experts = 0;
  std::int64_t num_experts_per_tok = 2;  // Hugging Face's MixtralConfig default
  double router_aux_loss_coef = 0.001;   // likewise
  // Not part of config.json (--moe-capacity-factor): each expert takes at most
  // ceil(factor * tokens * k / E) of a micro-batch's assignments; 0: dropless.
  double moe_capacity_factor = 0;

  bool is_moe() const { return num_local_experts > 0; }
  std::int64_t head_dim() const {
    return explicit_head_dim > 0 ? explicit_head_dim : hidden_size / num_attention_heads;
  }
  std::int64_t q_dim() const { return num_attention_heads * head_dim(); }  // q_proj rows
  std::int64_t kv_dim() const { return num_key_value_heads * head_dim(); }
  // Parameters of the whole model (the shared table counted once when tied).
  std::int64_t num_parameters() const;
};

// Refuses (ConfigError naming the field and what to change) a configuration that cannot work:
// non-positive sizes, hidden_size % heads (unless head_dim is explicit), heads % kv heads, odd
// head_dim (RoPE), eps <= 0, a rope_scaling whose numbers cannot be used, num_experts_per_tok
// outside [1, num_local_experts], a negative router_aux_loss_coef or capacity factor.
void validate(const ModelConfig& config);

// ConfigError unless `config` is dense: mixture-of-experts layers run on the single-device
// model (LlamaModel) and TSP's broadcast-ring schedule only so far (docs/moe.md); `what`
// names the refusing path ("the layout dp=2", "inference") for the message.
void refuse_mixture_of_experts(const ModelConfig& config, const std::string& what);

// "none", "linear (factor 4)", "llama3 (factor 8, low_freq_factor 1, ...)": for people.
std::string describe(const RopeScaling& scaling);

// Parses a Hugging Face Llama config.json text. rope_scaling of type linear or llama3 and an
// explicit head_dim and tie_word_embeddings are read. Unknown fields that would change the
// model's meaning (another rope_scaling type, attention_bias/mlp_bias true, hidden_act
// other than silu, ...) are refused with ConfigError naming the
// field; purely informational fields are returned in `warnings`. Wrong JSON types are refused
// naming the field. The result is validated.
ModelConfig parse_model_config(const std::string& json_text, std::vector<std::string>* warnings);
ModelConfig load_model_config(const std::string& path, std::vector<std::string>* warnings);
// The config.json text of a configuration (Hugging Face field names, model_type "llama").
std::string model_config_to_json(const ModelConfig& config);

// Built-in presets: "tiny" (tests), "tiny-moe" (tiny's attention, 4 experts of width 64,
// top-2), "small" (h 256, 4 layers, 4 heads, intermediate 688, vocab 256: the default job),
// "1b", "7b", "13b", "70b" (grouped-query). ConfigError listing the names on an unknown one.
ModelConfig model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

}  // namespace origami
