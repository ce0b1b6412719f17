#include "origami/tokenizer/tokenizer_config.h"

#include <filesystem>

#include "origami/tokenizer/json_fields.h"

namespace origami::tokenizer {

using nlohmann::json;

namespace {

// A token given as "text" or as {"content": "text", ...}; null is none.
std::optional<std::string> token_text(const json& config, std::string_view key,
                                      const JsonPlace& place) {
  const json* v = optional_field(config, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_object()) return string_field(*v, "content", place.at(key));
  refuse(place.at(key), "is neither a token text nor an object with \"content\"");
}

std::optional<bool> flag(const json& config, std::string_view key, const JsonPlace& place) {
  if (optional_field(config, key) == nullptr) return std::nullopt;
  return optional_bool(config, key, place, false);
}

}  // namespace

std::optional<TokenizerConfig> read_tokenizer_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "tokenizer_config.json").string();
  if (!std::filesystem::is_regular_file(path)) return std::nullopt;
  const json j = read_json_file(path, "tokenizer configuration");
  const JsonPlace place{path, ""};
  if (!j.is_object()) refuse(place, "is not a JSON object");
  TokenizerConfig c;
  c.path = path;
  c.bos = token_text(j, "bos_token", place);
  c.eos = token_text(j, "eos_token", place);
  c.pad = token_text(j, "pad_token", place);
  c.add_bos = flag(j, "add_bos_token", place);
  c.add_eos = flag(j, "add_eos_token", place);
  return c;
}

SpecialTokens resolve_special_tokens(const TokenizerConfig& config,
                                     const std::function<std::int32_t(std::string_view)>& id_of,
                                     SpecialTokens fallback) {
  const JsonPlace place{config.path, ""};
  const auto resolve = [&](const std::optional<std::string>& text, const char* key,
                           std::optional<std::int32_t>& slot) {
    if (!text) return;
    const std::int32_t id = id_of(*text);
    if (id < 0) refuse(place.at(key), "'" + *text + "' is not a token of the tokenizer");
    slot = id;
  };
  resolve(config.bos, "bos_token", fallback.bos);
  resolve(config.eos, "eos_token", fallback.eos);
  resolve(config.pad, "pad_token", fallback.pad);
  return fallback;
}

}  // namespace origami::tokenizer
