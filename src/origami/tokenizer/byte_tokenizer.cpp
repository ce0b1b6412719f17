#include "origami/tokenizer/byte_tokenizer.h"

#include "origami/core/error.h"

namespace origami::tokenizer {

std::vector<std::int32_t> ByteCodec::encode(std::string_view text) {
  std::vector<std::int32_t> ids(text.size());
  for (std::size_t i = 0; i < text.size(); ++i)
    ids[i] = static_cast<std::int32_t>(static_cast<unsigned char>(text[i]));
  return ids;
}

std::string ByteCodec::decode(std::span<const std::int32_t> ids) {
  std::string text(ids.size(), '\0');
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ORIGAMI_CHECK(ids[i] >= 0 && ids[i] < kVocabSize,
                  "byte tokenizer: id {} at position {} is not a byte (0..255)", ids[i], i);
    text[i] = static_cast<char>(static_cast<unsigned char>(ids[i]));
  }
  return text;
}

std::int64_t ByteTokenizer::vocab_size() const { return ByteCodec::kVocabSize; }

std::vector<std::int32_t> ByteTokenizer::encode(std::string_view text, bool) const {
  return ByteCodec::encode(text);
}

std::string ByteTokenizer::decode(std::span<const std::int32_t> ids, bool) const {
  check_ids(ids, vocab_size(), "byte tokenizer");
  return ByteCodec::decode(ids);
}

}  // namespace origami::tokenizer
