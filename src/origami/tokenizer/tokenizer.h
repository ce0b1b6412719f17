// One interface for every tokenizer Origami reads (docs/tokenizers.md):
//   * the byte tokenizer (vocabulary 256, a token is a byte; the default);
//   * a Hugging Face tokenizer.json with a BPE model, byte-level (GPT-2, Llama 3, Qwen,
//     SmolLM) or SentencePiece-style with byte fallback (Llama 2, Mistral, TinyLlama);
//   * a SentencePiece .model file, through libsentencepiece.
// Special tokens (bos / eos / pad) come from tokenizer_config.json beside the file when there
// is one. encode() makes its input valid UTF-8 first (each invalid sequence becomes U+FFFD, as
// the JavaScript reference reads bytes; the byte tokenizer alone takes bytes as they are).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace origami::tokenizer {

struct SpecialTokens {
  std::optional<std::int32_t> bos, eos, pad;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // What the tokenizer is, for people: "byte", "tokenizer.json BPE (byte-level)", ...
  virtual std::string kind() const = 0;
  // One past the largest token id (ids run 0 .. vocab_size() - 1).
  virtual std::int64_t vocab_size() const = 0;

  // The ids of `text`. add_special_tokens: what the tokenizer adds around a sequence (the
  // tokenizer.json post-processor's template, else bos / eos as tokenizer_config.json's
  // add_bos_token / add_eos_token say); no special tokens unless asked.
  virtual std::vector<std::int32_t> encode(std::string_view text,
                                           bool add_special_tokens = false) const = 0;
  // The text of `ids`; an id outside the vocabulary is a ConfigError naming it and its position.
  virtual std::string decode(std::span<const std::int32_t> ids,
                             bool skip_special_tokens = false) const = 0;

  const SpecialTokens& special_tokens() const { return special_; }

 protected:
  SpecialTokens special_;
};

// The tokenizer at `path`: "byte"; a tokenizer.json (or any .json); a SentencePiece .model; or
// a folder holding tokenizer.json or tokenizer.model. ConfigError (naming the file, and the
// field for tokenizer.json) for anything it cannot read or does not support.
std::unique_ptr<Tokenizer> load(const std::string& path);

// The file load(path) reads: `path` itself, or a folder's tokenizer.json, else its
// tokenizer.model. ConfigError as load() for a folder holding neither or a path that is no
// file (not for "byte", which has none).
std::string tokenizer_file(const std::string& path);

// ConfigError unless every id of `ids` is in 0 .. vocab_size - 1 (names the id and where it is).
void check_ids(std::span<const std::int32_t> ids, std::int64_t vocab_size, std::string_view who);

}  // namespace origami::tokenizer
