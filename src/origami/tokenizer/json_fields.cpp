#include "origami/tokenizer/json_fields.h"

#include <fstream>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::tokenizer {

using nlohmann::json;

JsonPlace JsonPlace::at(std::string_view key) const {
  return {file, field.empty() ? std::string(key) : fmt::format("{}.{}", field, key)};
}

JsonPlace JsonPlace::at(std::size_t index) const {
  return {file, fmt::format("{}[{}]", field, index)};
}

std::string JsonPlace::describe() const {
  return field.empty() ? file : fmt::format("{}: field {}", file, field);
}

void refuse(const JsonPlace& place, std::string_view problem) {
  throw ConfigError(fmt::format("tokenizer {}{}{}", place.describe(), place.field.empty() ? ": " : " ",
                                problem));
}

const json* optional_field(const json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

const json& required_field(const json& j, std::string_view key, const JsonPlace& place) {
  if (!j.is_object()) refuse(place, "is not a JSON object");
  const json* v = optional_field(j, key);
  if (v == nullptr) refuse(place.at(key), "is missing");
  return *v;
}

std::string string_field(const json& j, std::string_view key, const JsonPlace& place) {
  const json& v = required_field(j, key, place);
  if (!v.is_string()) refuse(place.at(key), "is not a string");
  return v.get<std::string>();
}

namespace {

// j[key] as a T when present, `fallback` when absent; refused naming the field otherwise.
template <class T, class Is>
T optional_value(const json& j, std::string_view key, const JsonPlace& place, T fallback, Is is,
                 std::string_view expected) {
  const json* v = optional_field(j, key);
  if (v == nullptr) return fallback;
  if (!(v->*is)()) refuse(place.at(key), expected);
  return v->get<T>();
}

}  // namespace

std::string optional_string(const json& j, std::string_view key, const JsonPlace& place,
                            std::string fallback) {
  return optional_value(j, key, place, std::move(fallback), &json::is_string, "is not a string");
}

bool optional_bool(const json& j, std::string_view key, const JsonPlace& place, bool fallback) {
  return optional_value(j, key, place, fallback, &json::is_boolean, "is not true or false");
}

std::int64_t optional_int(const json& j, std::string_view key, const JsonPlace& place,
                          std::int64_t fallback) {
  return optional_value(j, key, place, fallback, &json::is_number_integer, "is not an integer");
}

void refuse_type(const JsonPlace& place, std::string_view type, std::string_view supported) {
  refuse(place.at("type"), fmt::format("is '{}', which Origami does not support (supported: {})",
                                       type, supported));
}

std::string component_type(const json& j, const JsonPlace& place, std::string_view supported) {
  const std::string type = string_field(j, "type", place);
  std::string_view rest = supported;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view name = rest.substr(0, comma);
    while (name.starts_with(' ')) name.remove_prefix(1);
    if (name == type) return type;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  refuse_type(place, type, supported);
}

json read_json_file(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("tokenizer: cannot open the {} '{}'", what, path));
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    throw ConfigError(fmt::format("tokenizer: the {} '{}' is not valid JSON: {}", what, path,
                                  e.what()));
  }
}

}  // namespace origami::tokenizer
