#include "origami/tokenizer/byte_tokenizer.h"

#include "origami/data/dataset.h"

namespace origami::tokenizer {

std::int64_t ByteTokenizer::vocab_size() const { return data::ByteTokenizer::kVocabSize; }

std::vector<std::int32_t> ByteTokenizer::encode(std::string_view text, bool) const {
  return data::ByteTokenizer::encode(text);
}

std::string ByteTokenizer::decode(std::span<const std::int32_t> ids, bool) const {
  check_ids(ids, vocab_size(), "byte tokenizer");
  return data::ByteTokenizer::decode(ids);
}

}  // namespace origami::tokenizer
