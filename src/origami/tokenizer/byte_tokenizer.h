// The byte tokenizer (vocabulary 256) behind the Tokenizer interface: no special tokens, and
// bytes taken as they are (decode(encode(s)) == s for any bytes). The code itself is
// ByteCodec, which the dataset uses directly (data::ByteTokenizer, data/dataset.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "origami/tokenizer/tokenizer.h"

namespace origami::tokenizer {

// A token is a byte: ids 0..255, and decode(encode(s)) == s for any byte string.
struct ByteCodec {
  static constexpr std::int64_t kVocabSize = 256;
  static std::vector<std::int32_t> encode(std::string_view text);
  // Refuses (Error) ids outside 0..255.
  static std::string decode(std::span<const std::int32_t> ids);
};

class ByteTokenizer final : public Tokenizer {
 public:
  std::string kind() const override { return "byte"; }
  std::int64_t vocab_size() const override;
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const override;
};

}  // namespace origami::tokenizer
