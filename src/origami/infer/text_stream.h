// Generated token ids to text, as they arrive: what `origami generate` streams.
//
// Each push decodes the whole generated sequence again (a tokenizer's decoder may join or
// strip across tokens: SentencePiece's leading space, byte-level pieces of one character) and
// releases only the part that can no longer change: never half of a UTF-8 character (a
// decoded U+FFFD at the very end may be a character still arriving in pieces), never text
// that could still turn out to begin a stop string. A stop string ends the text just before
// it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "origami/tokenizer/tokenizer.h"

namespace origami::infer {

class TextStream {
 public:
  // `tokenizer` null: the byte tokenizer, a token is a byte, an id beyond 255 shows as <id>.
  TextStream(const tokenizer::Tokenizer* tokenizer, std::vector<std::string> stops);

  // Adds one generated id; returns the newly final text (possibly empty).
  std::string push(std::int32_t id);
  // The rest, once generation has ended (held-back bytes included).
  std::string finish();
  // True once a stop string appeared (the text is cut before it; push no more).
  bool stopped() const { return stopped_; }
  // All text released so far.
  const std::string& text() const { return released_; }

  // The id's text under the byte tokenizer.
  static std::string byte_piece(std::int32_t id);

 private:
  std::string decoded() const;
  std::string release_up_to(std::size_t end);

  const tokenizer::Tokenizer* tokenizer_;
  std::vector<std::string> stops_;
  std::size_t hold_ = 0;  // the longest stop string, less one byte: the most ever held
  std::vector<std::int32_t> ids_;
  std::string bytes_;  // byte tokenizer: the text so far
  std::string released_;
  bool stopped_ = false;
};

// The length of the longest prefix of s[0, end) that ends on a UTF-8 character boundary and
// does not end in an incomplete multi-byte sequence (bytes that are not UTF-8 at all count as
// complete: they will never become a character).
std::size_t complete_utf8_prefix(const std::string& s, std::size_t end);

}  // namespace origami::infer
