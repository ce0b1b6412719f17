// GPT-2's byte-to-unicode map: each byte is a printable code point (bytes that print as
// themselves keep their value, the others get 256, 257, ...), so byte-level vocabularies are
// written as text. Tokens map to raw bytes and back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace origami::tokenizer::byte_level {

// The code point that stands for byte b.
std::uint32_t char_of_byte(unsigned char b);
// The byte that code point cp stands for, or -1.
int byte_of_char(std::uint32_t cp);

// A byte-level token (valid UTF-8) as raw bytes; nothing when a code point stands for no byte.
std::optional<std::string> to_bytes(std::string_view token);
// Raw bytes as a byte-level token.
std::string from_bytes(std::string_view bytes);

}  // namespace origami::tokenizer::byte_level
