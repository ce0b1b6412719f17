#include "origami/io/generation_config.h"

#include <nlohmann/json.hpp>

#include "origami/core/error.h"
#include "origami/io/text_file.h"

namespace origami::io {

std::vector<std::int32_t> read_eos_token_ids(const std::string& path, std::int64_t vocab_size) {
  const std::string text = io::read_text_file(path, io::kConfigFileLimit, "generation config");
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(
        fmt::format("{}: not valid JSON ({}); fix the file's syntax", path, e.what()));
  }
  if (!root.is_object())
    throw ConfigError(fmt::format("{}: the top level must be a JSON object", path));
  if (!root.contains("eos_token_id") || root.at("eos_token_id").is_null()) return {};
  const nlohmann::json& v = root.at("eos_token_id");
  const nlohmann::json list = v.is_array() ? v : nlohmann::json::array({v});
  std::vector<std::int32_t> ids;
  for (const nlohmann::json& id : list) {
    if (!id.is_number_integer())
      throw ConfigError(
          fmt::format("{}: eos_token_id must be an integer or a list of integers, "
                      "got {}",
                      path, id.dump().substr(0, 80)));
    const std::int64_t n = id.get<std::int64_t>();
    if (n < 0 || n >= vocab_size)
      throw ConfigError(fmt::format("{}: eos_token_id {} is outside the model's vocabulary of {}",
                                    path, n, vocab_size));
    ids.push_back(static_cast<std::int32_t>(n));
  }
  return ids;
}

}  // namespace origami::io
