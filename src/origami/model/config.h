// The model's shape, with the field names of a Hugging Face Llama config.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

  std::int64_t head_dim() const { return hidden_size / num_attention_heads; }
  std::int64_t kv_dim() const { return num_key_value_heads * head_dim(); }
  // Parameters of the whole model (untied LM head).
  std::int64_t num_parameters() const;
};

// Refuses (ConfigError naming the field and what to change) a configuration that cannot work:
// non-positive sizes, hidden_size % heads, heads % kv heads, odd head_dim (RoPE), eps <= 0.
void validate(const ModelConfig& config);

// Parses a Hugging Face Llama config.json text. Unknown fields that would change the model's
// meaning (rope_scaling, head_dim != hidden/heads, attention_bias/mlp_bias true, hidden_act
// other than silu, tie_word_embeddings true, ...) are refused with ConfigError naming the
// field; purely informational fields are returned in `warnings`. Wrong JSON types are refused
// naming the field. The result is validated.
ModelConfig parse_model_config(const std::string& json_text, std::vector<std::string>* warnings);
ModelConfig load_model_config(const std::string& path, std::vector<std::string>* warnings);
// The config.json text of a configuration (Hugging Face field names, model_type "llama").
std::string model_config_to_json(const ModelConfig& config);

// Built-in presets: "tiny" (tests), "small" (h 256, 4 layers, 4 heads, intermediate 688,
// vocab 256: the default job), "1b", "7b", "13b", "70b" (grouped-query). ConfigError listing
// the names on an unknown one.
ModelConfig model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

}  // namespace origami
