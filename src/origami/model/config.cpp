// Model configuration: validation, Hugging Face config.json parsing and presets.
//
// The parser is deliberately strict: a field whose value would change what the model
// computes, and that Origami does not implement, is refused rather than ignored, because a
// silently different model would "train" and its numbers would mean nothing.
#include "origami/model/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "origami/core/error.h"
#include "origami/io/text_file.h"
#include "origami/io/strict_json.h"

namespace origami {

namespace {

using nlohmann::json;

// No single dimension may exceed this: kernels index rows and columns with 32-bit counts in
// places, and a larger value is certainly a typo.
constexpr std::int64_t kMaxDim = std::numeric_limits<std::int32_t>::max();

[[noreturn]] void refuse(const std::string& message) {
  throw ConfigError("config: " + message);
}

void check_positive(const char* field, std::int64_t value) {
  if (value <= 0) refuse(fmt::format("{} is {}; it must be a positive integer", field, value));
  if (value > kMaxDim)
    refuse(fmt::format("{} is {}; it must be at most {}", field, value, kMaxDim));
}

// a * b with overflow reported as the field names involved.
std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    refuse(fmt::format("the parameter count overflows 64 bits ({}); reduce the sizes", what));
  return out;
}
std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    refuse(fmt::format("the parameter count overflows 64 bits ({}); reduce the sizes", what));
  return out;
}

// Fields Origami reads into ModelConfig.
constexpr const char* kIntFields[] = {
    "vocab_size",          "hidden_size",         "intermediate_size",      "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
    "num_local_experts",   "num_experts_per_tok"};
constexpr const char* kFloatFields[] = {"rope_theta", "rms_norm_eps", "initializer_range",
                                        "router_aux_loss_coef"};
// Fields required in a config.json: without them the file does not describe a model.
constexpr const char* kRequired[] = {"vocab_size", "hidden_size", "intermediate_size",
                                     "num_hidden_layers", "num_attention_heads"};
// Fields that only describe the file or the tokenizer; they do not change the computation.
constexpr const char* kInformational[] = {"architectures",        "model_type",   "torch_dtype",
                                          "bos_token_id",         "eos_token_id", "pad_token_id",
                                          "transformers_version", "use_cache",    "_name_or_path",
                                          // Mixtral: whether HF returns the router logits;
                                          // Origami always adds the auxiliary loss
                                          "output_router_logits"};

template <std::size_t N>
bool contains(const char* const (&list)[N], const std::string& key) {
  for (const char* k : list)
    if (key == k) return true;
  return false;
}

const char* json_type(const json& v) {
  return v.type_name();  // "null", "boolean", "number", "string", "array", "object"
}

// A value as shown in an error message: scalars as JSON (long strings cut), containers by
// their first level only. Never a recursive dump: a hostile file may nest a million levels.
std::string show(const json& v) {
  if (v.is_object()) {
    std::string keys;
    int n = 0;
    for (const auto& [key, unused] : v.items()) {
      if (n++ == 4) {
        keys += ", ...";
        break;
      }
      keys += (keys.empty() ? "" : ", ") + show(json(key));
    }
    return "{" + keys + "}";
  }
  if (v.is_array()) return fmt::format("[an array of {} elements]", v.size());
  std::string text = v.dump();  // a scalar: no recursion
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

std::int64_t get_int(const json& v, const std::string& field) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() &&
        v.get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      refuse(fmt::format("{} is {}, too large; it must be at most {}", field, show(v), kMaxDim));
    return v.get<std::int64_t>();
  }
  refuse(fmt::format("{} must be an integer, got {} {}", field, json_type(v), show(v)));
}

double get_number(const json& v, const std::string& field) {
  if (v.is_number()) return v.get<double>();
  refuse(fmt::format("{} must be a number, got {} {}", field, json_type(v), show(v)));
}

bool get_bool(const json& v, const std::string& field) {
  if (v.is_boolean()) return v.get<bool>();
  refuse(fmt::format("{} must be true or false, got {} {}", field, json_type(v), show(v)));
}

// At most 20 names of at most 64 characters: a config with 3 million unknown keys printed a
// 29 MB warning line.
std::string join(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 20, kLength = 64;
  std::string s;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i)
    s += (s.empty() ? "" : ", ") +
         (names[i].size() > kLength ? names[i].substr(0, kLength) + "..." : names[i]);
  if (names.size() > kShown) s += fmt::format(" and {} more", names.size() - kShown);
  return s;
}

// A key given twice in one object is refused (io/strict_json.h).
json parse_refusing_duplicates(const std::string& text) {
  return io::parse_json_refusing_duplicates(text, [](const std::string& key) {
    refuse(fmt::format("field {} is given twice; keep one", key));
  });
}

// The fields that change the model's meaning. Each returns normally only if the value is
// the one Origami implements.
void check_meaningful(const std::string& key, const json& v) {
  if (key == "attention_bias" || key == "mlp_bias") {
    if (get_bool(v, key))
      refuse(fmt::format("{} is true; Origami's projections have no bias: set it to false", key));
  } else if (key == "hidden_act") {
    if (!v.is_string())
      refuse(fmt::format("hidden_act must be a string, got {} {}", json_type(v), show(v)));
    if (v.get<std::string>() != "silu")
      refuse(
          fmt::format("hidden_act is {}; Origami's gated MLP uses silu only: set it to "
                      "\"silu\"",
                      show(v)));
  } else if (key == "pretraining_tp") {
    const std::int64_t tp = get_int(v, key);
    if (tp != 1) refuse(fmt::format("pretraining_tp is {}; only 1 is supported: set it to 1", tp));
  } else if (key == "attention_dropout") {
    const double p = get_number(v, key);
    if (p != 0.0)
      refuse(fmt::format("attention_dropout is {}; Origami has no dropout: set it to 0", p));
  } else if (key == "router_jitter_noise") {
    const double p = get_number(v, key);
    if (p != 0.0)
      refuse(fmt::format("router_jitter_noise is {}; Origami's router is deterministic: set it "
                         "to 0", p));
  }
}

constexpr const char* kMeaningful[] = {"attention_bias",      "mlp_bias",      "hidden_act",
                                       "pretraining_tp",      "attention_dropout",
                                       "router_jitter_noise"};

// rope_scaling: null, or {"rope_type" (or the older "type"): "default" | "linear" | "llama3",
// and that type's numbers}. Every field is required, as transformers requires it; a field
// Origami does not know is refused (it would change the frequencies).
RopeScaling parse_rope_scaling(const json& v) {
  RopeScaling r;
  if (v.is_null()) return r;
  if (!v.is_object())
    refuse(fmt::format("rope_scaling must be an object or null, got {} {}", json_type(v), show(v)));
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (!v.contains(key)) continue;
    const json& t = v.at(key);
    if (!t.is_string())
      refuse(
          fmt::format("rope_scaling.{} must be a string, got {} {}", key, json_type(t), show(t)));
    if (!type.empty() && type != t.get<std::string>())
      refuse(fmt::format("rope_scaling.rope_type is \"{}\" but rope_scaling.type is {}; keep one",
                         type, show(t)));
    type = t.get<std::string>();
  }
  if (type.empty())
    refuse(
        fmt::format("rope_scaling {} has no rope_type; give \"linear\" or \"llama3\" (or "
                    "set rope_scaling to null)",
                    show(v)));
  std::vector<std::string> fields;
  if (type == "default") return r;
  if (type == "linear") {
    r.type = RopeScaling::Type::Linear;
    fields = {"factor"};
  } else if (type == "llama3") {
    r.type = RopeScaling::Type::Llama3;
    fields = {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
  } else {
    refuse(
        fmt::format("rope_scaling.rope_type is \"{}\"; Origami implements \"linear\" and "
                    "\"llama3\" (or null: plain RoPE)",
                    type));
  }
  for (const auto& [key, value] : v.items()) {
    if (key == "rope_type" || key == "type") continue;
    if (std::find(fields.begin(), fields.end(), key) == fields.end())
      refuse(
          fmt::format("rope_scaling.{} is not a field of rope_type \"{}\" that Origami knows "
                      "(it reads {}); remove it",
                      key, type, join(fields)));
  }
  for (const std::string& f : fields)
    if (!v.contains(f))
      refuse(fmt::format("rope_scaling.{} is missing; rope_type \"{}\" needs {}", f, type,
                         join(fields)));
  r.factor = get_number(v.at("factor"), "rope_scaling.factor");
  if (r.type == RopeScaling::Type::Llama3) {
    r.low_freq_factor = get_number(v.at("low_freq_factor"), "rope_scaling.low_freq_factor");
    r.high_freq_factor = get_number(v.at("high_freq_factor"), "rope_scaling.high_freq_factor");
    r.original_max_position_embeddings = static_cast<double>(get_int(
        v.at("original_max_position_embeddings"), "rope_scaling.original_max_position_embeddings"));
  }
  return r;
}

std::int64_t& int_field(ModelConfig& c, const std::string& key) {
  if (key == "vocab_size") return c.vocab_size;
  if (key == "hidden_size") return c.hidden_size;
  if (key == "intermediate_size") return c.intermediate_size;
  if (key == "num_hidden_layers") return c.num_hidden_layers;
  if (key == "num_attention_heads") return c.num_attention_heads;
  if (key == "num_key_value_heads") return c.num_key_value_heads;
  if (key == "num_local_experts") return c.num_local_experts;
  if (key == "num_experts_per_tok") return c.num_experts_per_tok;
  return c.max_position_embeddings;
}

double& float_field(ModelConfig& c, const std::string& key) {
  if (key == "rope_theta") return c.rope_theta;
  if (key == "rms_norm_eps") return c.rms_norm_eps;
  if (key == "router_aux_loss_coef") return c.router_aux_loss_coef;
  return c.initializer_range;
}

}  // namespace

std::int64_t ModelConfig::num_parameters() const {
  const std::int64_t h = hidden_size;
  const std::int64_t embed = checked_mul(vocab_size, h, "embedding");
  const std::int64_t qd = checked_mul(num_attention_heads, head_dim(), "q_proj");
  std::int64_t layer = checked_mul(h, qd, "q_proj");                   // q_proj
  layer = checked_add(layer, checked_mul(h, qd, "o_proj"), "o_proj");  // o_proj
  layer = checked_add(layer, checked_mul(2 * h, kv_dim(), "k/v_proj"), "k/v_proj");
  const std::int64_t mlp = checked_mul(3 * h, intermediate_size, "mlp");
  if (is_moe()) {  // E experts and the router [E, h]
    layer = checked_add(layer, checked_mul(num_local_experts, mlp, "experts"), "experts");
    layer = checked_add(layer, checked_mul(num_local_experts, h, "router"), "router");
  } else {
    layer = checked_add(layer, mlp, "mlp");
  }
  layer = checked_add(layer, 2 * h, "norms");  // input and post-attention RMSNorm
  std::int64_t total = checked_mul(layer, num_hidden_layers, "layers");
  const std::int64_t tables = tie_word_embeddings ? 1 : 2;  // tied: one table serves both
  total = checked_add(total, checked_mul(tables, embed, "embedding and LM head"), "embedding");
  return checked_add(total, h, "final norm");
}

void validate(const ModelConfig& c) {
  check_positive("vocab_size", c.vocab_size);
  check_positive("hidden_size", c.hidden_size);
  check_positive("intermediate_size", c.intermediate_size);
  check_positive("num_hidden_layers", c.num_hidden_layers);
  check_positive("num_attention_heads", c.num_attention_heads);
  check_positive("num_key_value_heads", c.num_key_value_heads);
  check_positive("max_position_embeddings", c.max_position_embeddings);
  if (c.explicit_head_dim < 0)
    refuse(fmt::format("head_dim is {}; it must be a positive integer", c.explicit_head_dim));
  if (c.explicit_head_dim > 0) check_positive("head_dim", c.explicit_head_dim);
  if (c.explicit_head_dim == 0 && c.hidden_size % c.num_attention_heads != 0)
    refuse(
        fmt::format("hidden_size ({}) is not divisible by num_attention_heads ({}); choose "
                    "a hidden_size that is a multiple of num_attention_heads",
                    c.hidden_size, c.num_attention_heads));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    refuse(
        fmt::format("num_attention_heads ({}) is not divisible by num_key_value_heads ({}); "
                    "choose num_key_value_heads dividing num_attention_heads",
                    c.num_attention_heads, c.num_key_value_heads));
  if (c.explicit_head_dim > 0 && c.explicit_head_dim % 2 != 0)
    refuse(
        fmt::format("head_dim is {}, odd; RoPE rotates pairs of dimensions, so it must be "
                    "even",
                    c.explicit_head_dim));
  if (c.head_dim() % 2 != 0)
    refuse(
        fmt::format("the head size hidden_size / num_attention_heads = {} / {} = {} is odd; "
                    "RoPE rotates pairs of dimensions, so it must be even",
                    c.hidden_size, c.num_attention_heads, c.head_dim()));
  (void)checked_mul(c.num_attention_heads, c.head_dim(), "num_attention_heads x head_dim");
  const RopeScaling& r = c.rope_scaling;
  if (r.type != RopeScaling::Type::None) {
    if (!(std::isfinite(r.factor) && r.factor > 0))
      refuse(
          fmt::format("rope_scaling.factor is {}; it must be a positive finite number (e.g. "
                      "8)",
                      r.factor));
  }
  if (r.type == RopeScaling::Type::Llama3) {
    if (!(std::isfinite(r.low_freq_factor) && r.low_freq_factor > 0))
      refuse(
          fmt::format("rope_scaling.low_freq_factor is {}; it must be a positive finite "
                      "number (e.g. 1)",
                      r.low_freq_factor));
    if (!(std::isfinite(r.high_freq_factor) && r.high_freq_factor > r.low_freq_factor))
      refuse(
          fmt::format("rope_scaling.high_freq_factor is {}; it must be a finite number "
                      "larger than low_freq_factor {} (e.g. 4)",
                      r.high_freq_factor, r.low_freq_factor));
    if (!(r.original_max_position_embeddings >= 1 && r.original_max_position_embeddings <= kMaxDim))
      refuse(
          fmt::format("rope_scaling.original_max_position_embeddings is {}; it must be a "
                      "positive integer (e.g. 8192)",
                      r.original_max_position_embeddings));
  }
  if (!(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0))
    refuse(fmt::format("rms_norm_eps is {}; it must be a positive finite number (e.g. 1e-5)",
                       c.rms_norm_eps));
  if (!(std::isfinite(c.rope_theta) && c.rope_theta > 0))
    refuse(fmt::format("rope_theta is {}; it must be a positive finite number (e.g. 10000)",
                       c.rope_theta));
  if (!(std::isfinite(c.initializer_range) && c.initializer_range > 0))
    refuse(
        fmt::format("initializer_range is {}; it must be a positive finite number (e.g. "
                    "0.02)",
                    c.initializer_range));
  if (c.num_local_experts < 0)
    refuse(fmt::format("num_local_experts is {}; it must be positive (or absent: a dense MLP)",
                       c.num_local_experts));
  if (c.is_moe()) {
    check_positive("num_local_experts", c.num_local_experts);
    if (c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_local_experts)
      refuse(fmt::format("num_experts_per_tok is {}; each token picks between 1 and "
                         "num_local_experts = {} experts: choose a value in [1, {}]",
                         c.num_experts_per_tok, c.num_local_experts, c.num_local_experts));
    if (!(std::isfinite(c.router_aux_loss_coef) && c.router_aux_loss_coef >= 0))
      refuse(fmt::format("router_aux_loss_coef is {}; it must be a finite number >= 0 (e.g. "
                         "0.001; 0: no load-balancing loss)",
                         c.router_aux_loss_coef));
    if (!(std::isfinite(c.moe_capacity_factor) && c.moe_capacity_factor >= 0))
      refuse(fmt::format("--moe-capacity-factor is {}; it must be a finite number > 0 (e.g. "
                         "1.25), or absent: dropless",
                         c.moe_capacity_factor));
  }
  (void)c.num_parameters();  // refuses sizes whose parameter count overflows
}

void refuse_mixture_of_experts(const ModelConfig& c, const std::string& what) {
  if (!c.is_moe()) return;
  throw ConfigError(fmt::format(
      "num_local_experts is {}: mixture-of-experts layers train under --strategy single, "
      "dp, tp, tpsp, sp/cp (with dp) and tsp (its broadcast-ring schedule, either "
      "--moe-schedule), each with or without pipeline stages, only so far; {} does not "
      "support them yet: use one of those, or a "
      "dense model",
      c.num_local_experts, what));
}

ModelConfig parse_model_config(const std::string& json_text, std::vector<std::string>* warnings) {
  json root;
  try {
    root = parse_refusing_duplicates(json_text);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number beyond double (1e400): found by fuzzing.
    refuse(fmt::format("not valid JSON ({}); fix the file's syntax", e.what()));
  }
  if (!root.is_object())
    refuse(fmt::format("the top level must be a JSON object, got {}", json_type(root)));

  for (const char* field : kRequired)
    if (!root.contains(field)) refuse(fmt::format("required field {} is missing; add it", field));

  ModelConfig c;
  std::vector<std::string> defaulted, informational, unknown;
  // Hugging Face's LlamaConfig defaults, so that a file means here what it means there.
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-6;
  c.max_position_embeddings = 2048;
  c.initializer_range = 0.02;
  for (const char* f : {"rope_theta", "rms_norm_eps", "max_position_embeddings"})
    if (!root.contains(f)) defaulted.push_back(f);

  bool kv_given = false;  // absent or null means num_attention_heads, as in Hugging Face
  const json* head_dim = nullptr;
  for (const auto& [key, value] : root.items()) {
    if (key == "head_dim") {
      if (!value.is_null()) head_dim = &value;
    } else if (key == "rope_scaling") {
      c.rope_scaling = parse_rope_scaling(value);
    } else if (key == "tie_word_embeddings") {  // absent: false, as in LlamaConfig
      c.tie_word_embeddings = get_bool(value, key);
    } else if (contains(kIntFields, key)) {
      if (key == "num_key_value_heads") {
        if (value.is_null()) continue;
        kv_given = true;
      }
      int_field(c, key) = get_int(value, key);
    } else if (contains(kFloatFields, key)) {
      float_field(c, key) = get_number(value, key);
    } else if (contains(kMeaningful, key)) {
      // Checked below, once the configuration is known to be valid.
    } else if (contains(kInformational, key)) {
      informational.push_back(key);
    } else {
      unknown.push_back(key);
    }
  }
  if (!kv_given) c.num_key_value_heads = c.num_attention_heads;
  if (head_dim != nullptr) {
    const std::int64_t d = get_int(*head_dim, "head_dim");
    check_positive("head_dim", d);
    // Equal to the derived size, it says nothing new: stored as "derived" so that the two
    // spellings of one model compare equal.
    const bool derived = c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads == 0 &&
                         d == c.hidden_size / c.num_attention_heads;
    c.explicit_head_dim = derived ? 0 : d;
  }
  validate(c);
  for (const auto& [key, value] : root.items())
    if (contains(kMeaningful, key)) check_meaningful(key, value);

  if (warnings != nullptr) {
    if (!defaulted.empty())
      warnings->push_back(fmt::format(
          "config: not given, Hugging Face's LlamaConfig defaults used: {} (rope_theta 10000, "
          "rms_norm_eps 1e-6, max_position_embeddings 2048)",
          join(defaulted)));
    if (!informational.empty())
      warnings->push_back(
          fmt::format("config: informational fields ignored (they do not change the model): {}",
                      join(informational)));
    if (!unknown.empty())
      warnings->push_back(fmt::format(
          "config: unknown fields ignored (not part of a Llama config that Origami knows; "
          "check that they do not change the model): {}",
          join(unknown)));
  }
  return c;
}

std::string describe(const RopeScaling& r) {
  switch (r.type) {
    case RopeScaling::Type::None:
      break;
    case RopeScaling::Type::Linear:
      return fmt::format("linear (factor {})", r.factor);
    case RopeScaling::Type::Llama3:
      return fmt::format(
          "llama3 (factor {}, low_freq_factor {}, high_freq_factor {}, "
          "original_max_position_embeddings {})",
          r.factor, r.low_freq_factor, r.high_freq_factor, r.original_max_position_embeddings);
  }
  return "none";
}

ModelConfig load_model_config(const std::string& path, std::vector<std::string>* warnings) {
  const std::string text = io::read_text_file(path, io::kConfigFileLimit, "config");
  try {
    return parse_model_config(text, warnings);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{} (in '{}')", e.what(), path));
  }
}

std::string model_config_to_json(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["architectures"] = {c.is_moe() ? "MixtralForCausalLM" : "LlamaForCausalLM"};
  j["model_type"] = c.is_moe() ? "mixtral" : "llama";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim();
  j["hidden_act"] = "silu";
  j["rope_theta"] = c.rope_theta;
  switch (c.rope_scaling.type) {
    case RopeScaling::Type::None:
      j["rope_scaling"] = nullptr;
      break;
    case RopeScaling::Type::Linear:
      j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope_scaling.factor}};
      break;
    case RopeScaling::Type::Llama3:
      j["rope_scaling"] = {
          {"rope_type", "llama3"},
          {"factor", c.rope_scaling.factor},
          {"low_freq_factor", c.rope_scaling.low_freq_factor},
          {"high_freq_factor", c.rope_scaling.high_freq_factor},
          {"original_max_position_embeddings",
           static_cast<std::int64_t>(c.rope_scaling.original_max_position_embeddings)}};
      break;
  }
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["initializer_range"] = c.initializer_range;
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.is_moe()) {
    j["num_local_experts"] = c.num_local_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
    j["router_aux_loss_coef"] = c.router_aux_loss_coef;
    j["router_jitter_noise"] = 0.0;
  }
  return j.dump(2) + "\n";
}

namespace {

ModelConfig make(std::int64_t vocab, std::int64_t h, std::int64_t inter, std::int64_t layers,
                 std::int64_t heads, std::int64_t kv, double theta, double eps,
                 std::int64_t max_pos) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = h;
  c.intermediate_size = inter;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv;
  c.rope_theta = theta;
  c.rms_norm_eps = eps;
  c.max_position_embeddings = max_pos;
  return c;
}

ModelConfig with_experts(ModelConfig c, std::int64_t experts, std::int64_t per_token) {
  c.num_local_experts = experts;
  c.num_experts_per_tok = per_token;
  return c;
}

const std::map<std::string, ModelConfig>& presets() {
  static const std::map<std::string, ModelConfig> table = {
      // Unit tests: grouped-query (4 heads over 2 KV heads), byte vocabulary.
      {"tiny", make(256, 64, 160, 2, 4, 2, 10000.0, 1e-5, 4096)},
      // Unit tests of the mixture-of-experts MLP: tiny's shape, 4 experts of width 64, top-2.
      {"tiny-moe", with_experts(make(256, 64, 64, 2, 4, 2, 10000.0, 1e-5, 4096), 4, 2)},
      // The default training job: ModelConfig's own defaults.
      {"small", ModelConfig{}},
      // Llama-3.2-1B-like (its rope_scaling and tied embeddings left out: plain RoPE, untied).
      {"1b", make(128256, 2048, 8192, 16, 32, 8, 500000.0, 1e-5, 131072)},
      // Llama-2-7B, -13B, -70B.
      {"7b", make(32000, 4096, 11008, 32, 32, 32, 10000.0, 1e-5, 4096)},
      {"13b", make(32000, 5120, 13824, 40, 40, 40, 10000.0, 1e-5, 4096)},
      {"70b", make(32000, 8192, 28672, 80, 64, 8, 10000.0, 1e-5, 4096)},
  };
  return table;
}

}  // namespace

ModelConfig model_preset(const std::string& name) {
  const auto& table = presets();
  const auto it = table.find(name);
  if (it == table.end())
    throw ConfigError(fmt::format("config: unknown model preset '{}'; the presets are: {}", name,
                                  join(model_preset_names())));
  return it->second;
}

std::vector<std::string> model_preset_names() {
  // In size order, not alphabetical: that is how a user reads the list.
  return {"tiny", "tiny-moe", "small", "1b", "7b", "13b", "70b"};
}

}  // namespace origami
