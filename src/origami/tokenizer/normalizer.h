// The tokenizer.json "normalizer": a chain of Prepend, Replace (of a string) and NFC, applied
// to each stretch of text between added tokens. Other types are refused naming the field.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "origami/tokenizer/json_fields.h"

namespace origami::tokenizer {

class Normalizer {
 public:
  Normalizer() = default;  // the identity (a null normalizer)
  static Normalizer from_json(const nlohmann::json* config, const JsonPlace& place);

  bool identity() const { return steps_.empty(); }
  std::string apply(std::string_view text) const;

 private:
  struct Step {
    enum class Type { Prepend, Replace, Nfc } type;
    std::string text;         // Prepend: what to prepend; Replace: the pattern
    std::string replacement;  // Replace
  };
  void add(const nlohmann::json& config, const JsonPlace& place);
  std::vector<Step> steps_;
};

// The string of a Replace's {"String": ...} pattern (a normalizer's or a decoder's); a
// {"Regex": ...} is refused naming the field.
std::string string_pattern(const nlohmann::json& config, const JsonPlace& place);

// prefix + text.
std::string prepended(std::string_view prefix, std::string_view text);

// Every occurrence of `pattern` (not empty) in `text` replaced by `replacement`.
std::string replace_all(std::string_view text, std::string_view pattern,
                        std::string_view replacement);

}  // namespace origami::tokenizer
