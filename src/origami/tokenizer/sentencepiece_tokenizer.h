// A SentencePiece .model file (Llama 2's tokenizer.model, ...), encoded and decoded by
// libsentencepiece. Special tokens: the model's own bos / eos / pad, or those tokenizer_config.json
// beside it names; add_special_tokens adds bos (unless add_bos_token is false there) and eos
// when add_eos_token is true.
#pragma once

#include <memory>

#include "origami/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace origami::tokenizer {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& path);
  ~SentencePieceTokenizer() override;

  std::string kind() const override { return "SentencePiece model"; }
  std::int64_t vocab_size() const override;
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const override;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::string path_;
  bool add_bos_ = true, add_eos_ = false;
};

}  // namespace origami::tokenizer
