// Reading tokenizer.json and tokenizer_config.json fields with errors that name the file and
// the field (ConfigError: the CLI exits 2 on it).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace origami::tokenizer {

// A position in a JSON file, for messages: "FILE: field model.merges[3]".
struct JsonPlace {
  std::string file;
  std::string field;  // dotted path from the root; empty at the root
  JsonPlace at(std::string_view key) const;
  JsonPlace at(std::size_t index) const;
  std::string describe() const;
};

[[noreturn]] void refuse(const JsonPlace& place, std::string_view problem);

// j[key] when present and not null, else nullptr.
const nlohmann::json* optional_field(const nlohmann::json& j, std::string_view key);
const nlohmann::json& required_field(const nlohmann::json& j, std::string_view key,
                                     const JsonPlace& place);
std::string string_field(const nlohmann::json& j, std::string_view key, const JsonPlace& place);
std::string optional_string(const nlohmann::json& j, std::string_view key,
                            const JsonPlace& place, std::string fallback);
bool optional_bool(const nlohmann::json& j, std::string_view key, const JsonPlace& place,
                   bool fallback);
std::int64_t optional_int(const nlohmann::json& j, std::string_view key, const JsonPlace& place,
                          std::int64_t fallback);
// The "type" of a component, refused unless it is one of `supported` (comma separated).
std::string component_type(const nlohmann::json& j, const JsonPlace& place,
                           std::string_view supported);
[[noreturn]] void refuse_type(const JsonPlace& place, std::string_view type,
                              std::string_view supported);

nlohmann::json read_json_file(const std::string& path, std::string_view what);

}  // namespace origami::tokenizer
