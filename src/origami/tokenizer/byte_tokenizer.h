// The byte tokenizer (data::ByteTokenizer, vocabulary 256) behind the Tokenizer interface: no
// special tokens, and bytes taken as they are (decode(encode(s)) == s for any bytes).
#pragma once

#include "origami/tokenizer/tokenizer.h"

namespace origami::tokenizer {

class ByteTokenizer final : public Tokenizer {
 public:
  std::string kind() const override { return "byte"; }
  std::int64_t vocab_size() const override;
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const override;
};

}  // namespace origami::tokenizer
