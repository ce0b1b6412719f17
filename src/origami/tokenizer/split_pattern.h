// The pre-tokenizer split patterns of byte-level BPE tokenizers, matched by hand over Unicode
// categories (std::regex has no \p{..}): a tokenizer.json Split regex is recognized by its text
// and refused when it is not one of these.
//   GPT-2 (and ByteLevel's use_regex):
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Llama 3 / Qwen 2 / Qwen 3 (GPT-4's), with \p{N}{1,3} or \p{N}:
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//     \s*[\r\n]+|\s+(?!\S)|\s+
// \s is the White_Space property (what the reference rewrites Oniguruma's \s to); (?i:..) folds
// ASCII letters only, as the reference does. Every position matches some alternative, so the
// pieces cover the text.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace origami::tokenizer {

class SplitPattern {
 public:
  static SplitPattern gpt2() { return SplitPattern(Kind::Gpt2, 0); }
  // The pattern a tokenizer.json Split regex spells, or nothing.
  static std::optional<SplitPattern> recognize(std::string_view regex);

  // Appends the matches of the pattern in `text` (valid UTF-8), in order, to `out`.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  enum class Kind { Gpt2, Gpt4 };
  SplitPattern(Kind kind, int max_digits) : kind_(kind), max_digits_(max_digits) {}
  Kind kind_;
  int max_digits_;  // Gpt4: the n of \p{N}{1,n}
};

}  // namespace origami::tokenizer
