// ModelConfig: presets, JSON round trip, and every refusal naming its field.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "origami/core/error.h"
#include "origami/model/config.h"

namespace origami {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// A complete, valid Hugging Face style config.json (the tiny preset).
json base_json() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "max_position_embeddings": 4096,
    "tie_word_embeddings": false, "hidden_act": "silu"
  })");
}

// Expects a ConfigError whose message contains every one of `parts`.
void expect_refused(const json& j, const std::vector<std::string>& parts) {
  try {
    parse_model_config(j.dump(), nullptr);
    FAIL() << "accepted: " << j.dump();
  } catch (const ConfigError& e) {
    for (const auto& p : parts) EXPECT_THAT(e.what(), HasSubstr(p)) << j.dump();
  }
}

json with(json j, const std::string& key, const json& value) {
  j[key] = value;
  return j;
}

TEST(ModelConfig, ParsesHuggingFaceFields) {
  std::vector<std::string> warnings;
  const ModelConfig c = parse_model_config(base_json().dump(), &warnings);
  EXPECT_EQ(c.vocab_size, 256);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 160);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.head_dim(), 16);
  EXPECT_EQ(c.kv_dim(), 32);
  // architectures and model_type are informational: listed in one warning.
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("architectures"));
  EXPECT_THAT(warnings[0], HasSubstr("model_type"));
}

TEST(ModelConfig, MissingOptionalFieldsTakeHuggingFaceDefaults) {
  json j = base_json();
  for (const char* f : {"num_key_value_heads", "rope_theta", "rms_norm_eps",
                        "max_position_embeddings", "architectures", "model_type"})
    j.erase(f);
  std::vector<std::string> warnings;
  const ModelConfig c = parse_model_config(j.dump(), &warnings);
  EXPECT_EQ(c.num_key_value_heads, c.num_attention_heads);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("rms_norm_eps"));
  // num_key_value_heads: null means the same as absent.
  const ModelConfig d =
      parse_model_config(with(base_json(), "num_key_value_heads", nullptr).dump(), nullptr);
  EXPECT_EQ(d.num_key_value_heads, 4);
}

TEST(ModelConfig, RoundTripsEveryPresetThroughJson) {
  for (const auto& name : model_preset_names()) {
    ModelConfig p = model_preset(name);
    p.initializer_range = 0.0123;
    p.rms_norm_eps = 1.0 / 3.0e6;  // not exactly representable in short decimal
    const std::string text = model_config_to_json(p);
    std::vector<std::string> warnings;
    const ModelConfig q = parse_model_config(text, &warnings);
    EXPECT_EQ(q.vocab_size, p.vocab_size) << name;
    EXPECT_EQ(q.hidden_size, p.hidden_size) << name;
    EXPECT_EQ(q.intermediate_size, p.intermediate_size) << name;
    EXPECT_EQ(q.num_hidden_layers, p.num_hidden_layers) << name;
    EXPECT_EQ(q.num_attention_heads, p.num_attention_heads) << name;
    EXPECT_EQ(q.num_key_value_heads, p.num_key_value_heads) << name;
    EXPECT_EQ(q.rope_theta, p.rope_theta) << name;
    EXPECT_EQ(q.rms_norm_eps, p.rms_norm_eps) << name;  // bit-exact double round trip
    EXPECT_EQ(q.max_position_embeddings, p.max_position_embeddings) << name;
    EXPECT_EQ(q.initializer_range, p.initializer_range) << name;
    EXPECT_EQ(q.num_local_experts, p.num_local_experts) << name;
    if (p.is_moe()) {
      EXPECT_EQ(q.num_experts_per_tok, p.num_experts_per_tok) << name;
      EXPECT_EQ(q.router_aux_loss_coef, p.router_aux_loss_coef) << name;
    }
    // Our own output carries only informational fields beyond the supported ones.
    ASSERT_EQ(warnings.size(), 1u) << name;
    EXPECT_THAT(warnings[0], HasSubstr("informational"));
  }
}

TEST(ModelConfig, PresetsMatchPublishedParameterCounts) {
  // Published counts of Llama-2 (untied head): 6,738,415,616 / 13,015,864,320 /
  // 68,976,648,192. Llama-3.2-1B has 1,235,814,400 with tied embeddings; untied adds V*h.
  EXPECT_EQ(model_preset("7b").num_parameters(), 6738415616);
  EXPECT_EQ(model_preset("13b").num_parameters(), 13015864320);
  EXPECT_EQ(model_preset("70b").num_parameters(), 68976648192);
  EXPECT_EQ(model_preset("1b").num_parameters(), 1235814400 + 128256LL * 2048);
  // tiny by hand: 2 * V*h + L * (q,o: 2h^2 + k,v: 2*h*kv_dim + mlp: 3*h*f + norms: 2h) + h.
  const std::int64_t V = 256, h = 64, f = 160, kv = 32, L = 2;
  EXPECT_EQ(model_preset("tiny").num_parameters(),
            2 * V * h + L * (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h) + h);
  const ModelConfig small = model_preset("small");
  EXPECT_EQ(small.hidden_size, 256);
  EXPECT_EQ(small.num_hidden_layers, 4);
  EXPECT_EQ(small.intermediate_size, 688);
  EXPECT_EQ(small.vocab_size, 256);
  EXPECT_EQ(model_preset("1b").rope_theta, 500000.0);
  EXPECT_EQ(model_preset("70b").num_key_value_heads, 8);
  for (const auto& name : model_preset_names()) EXPECT_NO_THROW(validate(model_preset(name)));
}

// Mixtral-8x7B-v0.1's config.json (its fields as published; sliding_window is null there).
json mixtral_json() {
  return json::parse(R"({
    "architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "num_local_experts": 8, "num_experts_per_tok": 2, "router_aux_loss_coef": 0.02,
    "output_router_logits": false, "rope_theta": 1e6, "rms_norm_eps": 1e-5,
    "max_position_embeddings": 32768, "tie_word_embeddings": false, "hidden_act": "silu",
    "router_jitter_noise": 0.0
  })");
}

TEST(ModelConfig, ReadsMixtralsExpertsAndCountsTheirParameters) {
  std::vector<std::string> warnings;
  const ModelConfig c = parse_model_config(mixtral_json().dump(), &warnings);
  EXPECT_TRUE(c.is_moe());
  EXPECT_EQ(c.num_local_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.router_aux_loss_coef, 0.02);
  EXPECT_EQ(c.moe_capacity_factor, 0.0);  // dropless unless --moe-capacity-factor says
  // Mixtral-8x7B's published count: 46,702,792,704 (8 experts and a router per layer).
  EXPECT_EQ(c.num_parameters(), 46702792704);
  ASSERT_EQ(warnings.size(), 1u);  // informational only (architectures, output_router_logits)
  EXPECT_THAT(warnings[0], HasSubstr("output_router_logits"));
  // Absent: a dense model; the tiny-moe preset by hand.
  EXPECT_FALSE(parse_model_config(base_json().dump(), nullptr).is_moe());
  const std::int64_t V = 256, h = 64, f = 64, kv = 32, L = 2, E = 4;
  EXPECT_EQ(model_preset("tiny-moe").num_parameters(),
            2 * V * h + L * (2 * h * h + 2 * h * kv + E * 3 * h * f + E * h + 2 * h) + h);
}

TEST(ModelConfig, RefusesImpossibleExpertSettingsNamingTheField) {
  expect_refused(with(mixtral_json(), "num_experts_per_tok", 9),
                 {"num_experts_per_tok is 9", "[1, 8]"});
  expect_refused(with(mixtral_json(), "num_experts_per_tok", 0), {"num_experts_per_tok is 0"});
  expect_refused(with(mixtral_json(), "num_local_experts", -2), {"num_local_experts is -2"});
  expect_refused(with(mixtral_json(), "router_aux_loss_coef", -1), {"router_aux_loss_coef"});
  expect_refused(with(mixtral_json(), "router_jitter_noise", 0.01), {"router_jitter_noise"});
  expect_refused(with(mixtral_json(), "num_local_experts", "8"), {"num_local_experts must be"});
  ModelConfig c = model_preset("tiny-moe");
  c.moe_capacity_factor = -0.5;
  EXPECT_THROW(validate(c), ConfigError);
}

TEST(ModelConfig, UnknownPresetListsTheNames) {
  try {
    model_preset("3b");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'3b'"));
    EXPECT_THAT(e.what(), HasSubstr("tiny, tiny-moe, small, 1b, 7b, 13b, 70b"));
  }
}

TEST(ModelConfig, RefusesInconsistentSizes) {
  expect_refused(with(base_json(), "hidden_size", 66),
                 {"hidden_size (66)", "num_attention_heads (4)"});
  expect_refused(with(base_json(), "num_key_value_heads", 3),
                 {"num_attention_heads (4)", "num_key_value_heads (3)"});
  // head size 72/4 = 18 is fine; 36/4 = 9 is odd (RoPE pairs).
  expect_refused(with(base_json(), "hidden_size", 36), {"head size", "odd"});
  for (const char* f : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                        "num_attention_heads", "num_key_value_heads", "max_position_embeddings"}) {
    expect_refused(with(base_json(), f, 0), {f, "positive"});
    expect_refused(with(base_json(), f, -4), {f, "positive"});
  }
  expect_refused(with(base_json(), "vocab_size", 1LL << 40), {"vocab_size", "at most"});
  expect_refused(with(base_json(), "vocab_size", 18446744073709551615ULL),
                 {"vocab_size", "too large"});
  expect_refused(with(base_json(), "rms_norm_eps", 0.0), {"rms_norm_eps"});
  expect_refused(with(base_json(), "rms_norm_eps", -1e-5), {"rms_norm_eps"});
  expect_refused(with(base_json(), "rope_theta", 0), {"rope_theta"});
  expect_refused(with(base_json(), "initializer_range", -0.02), {"initializer_range"});
  // Every size within bounds, but the parameter count overflows 64 bits.
  json big = base_json();
  big["vocab_size"] = 2000000000;
  big["hidden_size"] = 2000000000;
  big["num_attention_heads"] = 1000000000;
  big["num_key_value_heads"] = 1000000000;
  expect_refused(big, {"overflows"});
}

TEST(ModelConfig, RefusesWrongTypesNamingTheField) {
  expect_refused(with(base_json(), "hidden_size", "64"), {"hidden_size", "integer", "string"});
  expect_refused(with(base_json(), "hidden_size", 64.0), {"hidden_size", "integer"});
  expect_refused(with(base_json(), "num_hidden_layers", true), {"num_hidden_layers", "integer"});
  expect_refused(with(base_json(), "vocab_size", nullptr), {"vocab_size", "integer", "null"});
  expect_refused(with(base_json(), "rope_theta", "1e4"), {"rope_theta", "number"});
  expect_refused(with(base_json(), "rms_norm_eps", json::array({1e-5})),
                 {"rms_norm_eps", "number"});
  expect_refused(with(base_json(), "tie_word_embeddings", 0),
                 {"tie_word_embeddings", "true or false"});
  expect_refused(with(base_json(), "hidden_act", 1), {"hidden_act", "string"});
  expect_refused(with(base_json(), "head_dim", "16"), {"head_dim", "integer"});
}

TEST(ModelConfig, RefusesMeaningChangingFields) {
  expect_refused(with(base_json(), "rope_scaling", json{{"rope_type", "yarn"}, {"factor", 8.0}}),
                 {"rope_scaling.rope_type", "yarn", "llama3"});
  expect_refused(with(base_json(), "head_dim", 15), {"head_dim is 15", "even"});
  expect_refused(with(base_json(), "attention_bias", true), {"attention_bias", "false"});
  expect_refused(with(base_json(), "mlp_bias", true), {"mlp_bias", "false"});
  expect_refused(with(base_json(), "hidden_act", "gelu"), {"hidden_act", "silu"});
  expect_refused(with(base_json(), "pretraining_tp", 2), {"pretraining_tp", "1"});
  expect_refused(with(base_json(), "attention_dropout", 0.1), {"attention_dropout", "0"});
  // The same fields with the values Origami implements are accepted silently.
  json ok = base_json();
  ok["rope_scaling"] = nullptr;
  ok["head_dim"] = 16;
  ok["attention_bias"] = false;
  ok["mlp_bias"] = false;
  ok["pretraining_tp"] = 1;
  ok["attention_dropout"] = 0.0;
  ok.erase("architectures");
  ok.erase("model_type");
  std::vector<std::string> warnings;
  EXPECT_NO_THROW(parse_model_config(ok.dump(), &warnings));
  EXPECT_TRUE(warnings.empty()) << warnings[0];
}

// tie_word_embeddings (SmolLM, Llama 3.2): read, absent means false as in LlamaConfig, written
// back, and the shared table counted once in the parameter count.
TEST(ModelConfig, ReadsTiedEmbeddings) {
  const ModelConfig untied = parse_model_config(base_json().dump(), nullptr);
  EXPECT_FALSE(untied.tie_word_embeddings);
  json no_field = base_json();
  no_field.erase("tie_word_embeddings");
  EXPECT_FALSE(parse_model_config(no_field.dump(), nullptr).tie_word_embeddings);
  const ModelConfig tied =
      parse_model_config(with(base_json(), "tie_word_embeddings", true).dump(), nullptr);
  EXPECT_TRUE(tied.tie_word_embeddings);
  EXPECT_EQ(untied.num_parameters() - tied.num_parameters(),
            tied.vocab_size * tied.hidden_size);
  const ModelConfig back = parse_model_config(model_config_to_json(tied), nullptr);
  EXPECT_TRUE(back.tie_word_embeddings);
  EXPECT_EQ(model_config_to_json(back), model_config_to_json(tied));
  EXPECT_FALSE(parse_model_config(model_config_to_json(untied), nullptr).tie_word_embeddings);
}

// Llama 3.1's rope_scaling, exactly as its config.json spells it, and the older "type" key.
TEST(ModelConfig, ReadsRopeScalingLlama3AndLinear) {
  const json llama31 = json::parse(R"({"factor": 8.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"})");
  const ModelConfig c =
      parse_model_config(with(base_json(), "rope_scaling", llama31).dump(), nullptr);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Llama3);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192.0);
  EXPECT_THAT(describe(c.rope_scaling), HasSubstr("llama3 (factor 8"));
  // The written config reads back to the same scaling (checkpoints and exports keep it).
  EXPECT_EQ(parse_model_config(model_config_to_json(c), nullptr).rope_scaling, c.rope_scaling);

  const ModelConfig lin = parse_model_config(
      with(base_json(), "rope_scaling", json{{"type", "linear"}, {"factor", 2.0}}).dump(), nullptr);
  EXPECT_EQ(lin.rope_scaling.type, RopeScaling::Type::Linear);
  EXPECT_EQ(lin.rope_scaling.factor, 2.0);
  EXPECT_EQ(parse_model_config(model_config_to_json(lin), nullptr).rope_scaling, lin.rope_scaling);
  const ModelConfig plain = parse_model_config(
      with(base_json(), "rope_scaling", json{{"rope_type", "default"}}).dump(), nullptr);
  EXPECT_EQ(plain.rope_scaling.type, RopeScaling::Type::None);

  auto without = [&](const char* field) {
    json r = llama31;
    r.erase(field);
    return with(base_json(), "rope_scaling", r);
  };
  expect_refused(without("low_freq_factor"), {"rope_scaling.low_freq_factor is missing"});
  expect_refused(without("original_max_position_embeddings"),
                 {"rope_scaling.original_max_position_embeddings is missing"});
  expect_refused(without("rope_type"), {"rope_scaling", "no rope_type"});
  json extra = llama31;
  extra["attention_factor"] = 1.0;
  expect_refused(with(base_json(), "rope_scaling", extra), {"rope_scaling.attention_factor"});
  json clash = llama31;
  clash["type"] = "linear";
  expect_refused(with(base_json(), "rope_scaling", clash), {"rope_scaling.type", "keep one"});
  json bad = llama31;
  bad["high_freq_factor"] = 0.5;
  expect_refused(with(base_json(), "rope_scaling", bad), {"rope_scaling.high_freq_factor", "0.5"});
  bad = llama31;
  bad["factor"] = "8";
  expect_refused(with(base_json(), "rope_scaling", bad), {"rope_scaling.factor", "number"});
  bad = llama31;
  bad["factor"] = -1.0;
  expect_refused(with(base_json(), "rope_scaling", bad), {"rope_scaling.factor is -1"});
  expect_refused(with(base_json(), "rope_scaling", 8), {"rope_scaling must be an object"});
}

// head_dim: equal to hidden / heads it changes nothing; otherwise the projections are
// [heads * head_dim, h] and [h, heads * head_dim] and the parameter count follows (every
// strategy takes it: tests/parallel's registry_headdim cases).
TEST(ModelConfig, ReadsAnExplicitHeadDim) {
  const ModelConfig same = parse_model_config(with(base_json(), "head_dim", 16).dump(), nullptr);
  EXPECT_EQ(same.explicit_head_dim, 0);
  json j = with(base_json(), "head_dim", 24);
  j["hidden_size"] = 60;  // not a multiple of 4 heads x 24: fine with an explicit head_dim
  const ModelConfig c = parse_model_config(j.dump(), nullptr);
  EXPECT_EQ(c.head_dim(), 24);
  EXPECT_EQ(c.q_dim(), 96);
  EXPECT_EQ(c.kv_dim(), 48);
  const std::int64_t h = 60, f = 160, V = 256, layer = h * 96 * 2 + 2 * h * 48 + 3 * h * f + 2 * h;
  EXPECT_EQ(c.num_parameters(), 2 * layer + 2 * V * h + h);
  EXPECT_EQ(parse_model_config(model_config_to_json(c), nullptr).explicit_head_dim, 24);
  expect_refused(with(base_json(), "head_dim", 0), {"head_dim", "positive"});
  json odd = base_json();
  odd["hidden_size"] = 62;  // without head_dim, still refused as before
  expect_refused(odd, {"hidden_size (62)", "num_attention_heads"});
}

TEST(ModelConfig, WarnsOnInformationalAndUnknownFields) {
  json j = base_json();
  j["torch_dtype"] = "bfloat16";
  j["bos_token_id"] = 1;
  j["eos_token_id"] = 2;
  j["pad_token_id"] = nullptr;
  j["transformers_version"] = "4.40.0";
  j["use_cache"] = true;
  j["_name_or_path"] = "meta-llama/Llama-2-7b-hf";
  j["sliding_window"] = 4096;
  std::vector<std::string> warnings;
  parse_model_config(j.dump(), &warnings);
  ASSERT_EQ(warnings.size(), 2u);
  for (const char* f : {"torch_dtype", "bos_token_id", "eos_token_id", "pad_token_id",
                        "transformers_version", "use_cache", "_name_or_path"})
    EXPECT_THAT(warnings[0], HasSubstr(f));
  EXPECT_THAT(warnings[1], HasSubstr("unknown"));
  EXPECT_THAT(warnings[1], HasSubstr("sliding_window"));
  EXPECT_THAT(warnings[1], ::testing::Not(HasSubstr("torch_dtype")));
}

TEST(ModelConfig, RefusesMalformedDocuments) {
  try {
    parse_model_config("{\"hidden_size\": 64,", nullptr);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("not valid JSON"));
  }
  // A number beyond double's range is an out_of_range, not a parse_error, inside nlohmann
  // (found by fuzz/config_fuzz.cpp): still a ConfigError.
  for (const char* text : {R"({"vocab_size": 256, "rms_norm_eps": 1e9223372036854775807})",
                           R"({"rope_theta": -1e400})"}) {
    try {
      parse_model_config(text, nullptr);
      FAIL() << text;
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr("not valid JSON"));
    }
  }
  try {
    parse_model_config("[1, 2]", nullptr);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("JSON object"));
  }
  for (const char* f : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                        "num_attention_heads"}) {
    json j = base_json();
    j.erase(f);
    expect_refused(j, {f, "missing"});
  }
}

// Hostile documents: values nested 200,000 levels deep or megabytes long are refused with
// a short message (found by fuzz/config_fuzz.cpp: a recursive dump in a message overflowed
// the stack).
TEST(ModelConfig, RefusesDeepAndHugeValuesWithShortMessages) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  std::string base = base_json().dump();
  base.pop_back();  // drop the closing brace
  for (const std::string field :
       {"rope_scaling", "hidden_size", "rope_theta", "hidden_act", "attention_bias"}) {
    std::string text = base;
    // A later duplicate key wins in nlohmann, as in Python's json.
    text += ",\"" + field + "\":" + deep + "}";
    try {
      parse_model_config(text, nullptr);
      FAIL() << field;
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr(field));
      EXPECT_LT(std::string(e.what()).size(), 300u);
    }
  }
  std::string text = base + ",\"hidden_act\":\"" + std::string(1 << 20, 'x') + "\"}";
  try {
    parse_model_config(text, nullptr);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("hidden_act"));
    EXPECT_LT(std::string(e.what()).size(), 300u);
  }
  // Deep nesting under an unknown key is parsed (iteratively) and only warned about.
  std::vector<std::string> warnings;
  EXPECT_NO_THROW(parse_model_config(base + ",\"extra\":" + deep + "}", &warnings));
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_THAT(warnings[1], HasSubstr("extra"));
}

TEST(ModelConfig, LoadsFromFileAndNamesTheFileOnError) {
  const std::string path = ::testing::TempDir() + "origami_config_test.json";
  {
    std::ofstream out(path);
    out << with(base_json(), "hidden_act", "relu").dump();
  }
  try {
    load_model_config(path, nullptr);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("hidden_act"));
    EXPECT_THAT(e.what(), HasSubstr(path));
  }
  {
    std::ofstream out(path);
    out << base_json().dump();
  }
  EXPECT_EQ(load_model_config(path, nullptr).hidden_size, 64);
  std::remove(path.c_str());
  try {
    load_model_config(path, nullptr);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot open"));
    EXPECT_THAT(e.what(), HasSubstr(path));
  }
}

}  // namespace
}  // namespace origami
