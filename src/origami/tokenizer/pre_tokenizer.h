// The tokenizer.json "pre_tokenizer": splits normalized text into the pieces the model encodes
// one by one. Steps: Sequence, Split (a known pattern, split_pattern.h, behavior Isolated),
// ByteLevel (optional prefix space, optional GPT-2 split; it makes the model byte-level and must
// come last), Digits, Metaspace. Other types and settings are refused naming the field.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "origami/tokenizer/json_fields.h"
#include "origami/tokenizer/split_pattern.h"

namespace origami::tokenizer {

// Pieces of text: views into the input or into `owned` (text a step changed).
struct Pieces {
  std::vector<std::string_view> views;
  std::deque<std::string> owned;
  void clear() {
    views.clear();
    owned.clear();
  }
};

class PreTokenizer {
 public:
  PreTokenizer() = default;  // a null pre-tokenizer: the text is one piece
  static PreTokenizer from_json(const nlohmann::json* config, const JsonPlace& place);

  // Whether a ByteLevel step maps the pieces to bytes (the model's alphabet is then bytes).
  bool byte_level() const { return byte_level_; }
  // The pieces of `text`; `section` is the index of the text among the stretches between added
  // tokens (Metaspace's prepend_scheme "first" prepends in section 0 only).
  void apply(std::string_view text, std::size_t section, Pieces& out) const;

 private:
  struct Step {
    enum class Type { Split, ByteLevel, Digits, Metaspace } type;
    std::optional<SplitPattern> pattern;  // Split, ByteLevel with use_regex
    bool add_prefix_space = false;        // ByteLevel
    bool individual_digits = false;       // Digits
    std::string replacement;              // Metaspace
    enum class Prepend { Always, First, Never } prepend = Prepend::Always;
    bool split = false;                   // Metaspace: split before each replacement
  };
  void add(const nlohmann::json& config, const JsonPlace& place);
  void apply_step(const Step& step, std::string_view piece, std::size_t section,
                  Pieces& out) const;
  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace origami::tokenizer
