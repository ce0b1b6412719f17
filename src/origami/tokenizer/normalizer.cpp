#include "origami/tokenizer/normalizer.h"

#include "origami/tokenizer/nfc.h"

namespace origami::tokenizer {

using nlohmann::json;

std::string prepended(std::string_view prefix, std::string_view text) {
  std::string out;
  out.reserve(prefix.size() + text.size());
  out.append(prefix);
  out.append(text);
  return out;
}

std::string replace_all(std::string_view text, std::string_view pattern,
                        std::string_view replacement) {
  std::string out;
  out.reserve(text.size());
  std::size_t from = 0;
  for (std::size_t at; (at = text.find(pattern, from)) != std::string_view::npos;
       from = at + pattern.size()) {
    out.append(text.substr(from, at - from));
    out.append(replacement);
  }
  out.append(text.substr(from));
  return out;
}

// The string of a Replace's {"String": ...} pattern; a {"Regex": ...} is refused.
std::string string_pattern(const json& config, const JsonPlace& place) {
  const json& pattern = required_field(config, "pattern", place);
  const JsonPlace at = place.at("pattern");
  if (optional_field(pattern, "Regex") != nullptr)
    refuse(at.at("Regex"), "a regular expression here is not supported (only String)");
  std::string s = string_field(pattern, "String", at);
  if (s.empty()) refuse(at.at("String"), "is empty");
  return s;
}

Normalizer Normalizer::from_json(const json* config, const JsonPlace& place) {
  Normalizer n;
  if (config != nullptr) n.add(*config, place);
  return n;
}

void Normalizer::add(const json& config, const JsonPlace& place) {
  const std::string type = component_type(config, place, "Sequence, Prepend, Replace, NFC");
  if (type == "Sequence") {
    const json& list = required_field(config, "normalizers", place);
    if (!list.is_array()) refuse(place.at("normalizers"), "is not a list");
    for (std::size_t i = 0; i < list.size(); ++i) add(list[i], place.at("normalizers").at(i));
  } else if (type == "Prepend") {
    steps_.push_back({Step::Type::Prepend, string_field(config, "prepend", place), ""});
  } else if (type == "Replace") {
    steps_.push_back({Step::Type::Replace, string_pattern(config, place),
                      string_field(config, "content", place)});
  } else {
    steps_.push_back({Step::Type::Nfc, "", ""});
  }
}

std::string Normalizer::apply(std::string_view text) const {
  std::string s(text);
  for (const Step& step : steps_) {
    switch (step.type) {
      case Step::Type::Prepend:
        s = prepended(step.text, s);
        break;
      case Step::Type::Replace:
        if (s.find(step.text) != std::string::npos) s = replace_all(s, step.text, step.replacement);
        break;
      case Step::Type::Nfc:
        s = nfc(s);
        break;
    }
  }
  return s;
}

}  // namespace origami::tokenizer
