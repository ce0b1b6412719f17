// UTF-8 for the tokenizers. Input text is made valid first: each invalid sequence becomes
// U+FFFD by the "maximal subpart" rule of the Unicode standard, which is also the WHATWG
// decoder's (TextDecoder, Node's Buffer), so Origami sees the text the JavaScript reference
// sees. Everything after that works on valid UTF-8.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace origami::tokenizer::utf8 {

inline constexpr std::uint32_t kReplacement = 0xFFFD;

bool is_valid(std::string_view s);
// `s` with every invalid sequence replaced by U+FFFD (a copy of `s` when it is valid).
std::string sanitize(std::string_view s);

void append(std::string& out, std::uint32_t cp);

// The length in bytes of the valid UTF-8 sequence that starts with `lead`.
inline int sequence_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// Decodes the code point at s[i] of valid UTF-8 and advances i past it.
inline std::uint32_t next(std::string_view s, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const int n = sequence_length(b0);
  std::uint32_t cp = b0 & (0x7F >> n);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += static_cast<std::size_t>(n);
  return cp;
}

}  // namespace origami::tokenizer::utf8
