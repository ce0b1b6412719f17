// The tokenizer.json "decoder": token texts back to text through a chain of ByteLevel,
// Replace (of a string), ByteFallback, Fuse, Strip and Metaspace, as the reference library
// applies them. Other types are refused naming the field. Invalid UTF-8 that decoded bytes
// form (a partial sequence of byte tokens) becomes U+FFFD, as in the reference.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "origami/tokenizer/json_fields.h"
#include "origami/tokenizer/string_map.h"

namespace origami::tokenizer {

class Decoder {
 public:
  Decoder() = default;  // a null decoder: the tokens joined with spaces
  // `added` holds the texts of the added tokens (a ByteLevel step passes them through).
  static Decoder from_json(const nlohmann::json* config, const JsonPlace& place,
                           std::unordered_set<std::string, StringHash, std::equal_to<>> added);

  std::string decode(std::vector<std::string> tokens) const;

 private:
  struct Step {
    enum class Type { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace } type;
    std::string pattern, content;  // Replace; Strip's content; Metaspace's replacement
    std::size_t start = 0, stop = 0;  // Strip
  };
  void add(const nlohmann::json& config, const JsonPlace& place);
  std::vector<std::string> apply(const Step& step, std::vector<std::string> tokens) const;
  std::vector<Step> steps_;
  bool null_ = true;
  std::unordered_set<std::string, StringHash, std::equal_to<>> added_;
};

}  // namespace origami::tokenizer
