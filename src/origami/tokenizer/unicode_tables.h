// Unicode data for the tokenizers: general-category classes for the split patterns and the
// tables of NFC. Generated into unicode_tables.cpp by gen_unicode_tables.py (beside this file)
// from Python's unicodedata; kUnicodeVersion names the Unicode version.
#pragma once

#include <cstddef>
#include <cstdint>

namespace origami::tokenizer::unicode {

extern const char kUnicodeVersion[];

inline constexpr std::uint8_t kLetter = 1;      // \p{L}
inline constexpr std::uint8_t kNumber = 2;      // \p{N}
inline constexpr std::uint8_t kSpace = 4;       // \p{White_Space} (the patterns' \s)
inline constexpr std::uint8_t kNfcUnsafe = 8;   // NFC may change it or combine it

extern const std::uint8_t kFlags_index[0x110000 / 256];
extern const std::uint8_t kFlags_blocks[][256];
extern const std::uint8_t kCcc_index[0x110000 / 256];
extern const std::uint8_t kCcc_blocks[][256];

struct Decomposition {
  std::uint32_t code_point;
  std::uint16_t offset;  // into kDecompositionData
  std::uint8_t length;
};
extern const std::uint32_t kDecompositionData[];
extern const Decomposition kDecompositions[];  // sorted by code point
extern const std::size_t kDecompositionCount;

struct Composition {
  std::uint64_t pair;  // first << 21 | second
  std::uint32_t composite;
};
extern const Composition kCompositions[];  // sorted by pair
extern const std::size_t kCompositionCount;

// The flags of a code point (0 past U+10FFFF).
inline std::uint8_t flags(std::uint32_t cp) {
  if (cp >= 0x110000) return 0;
  return kFlags_blocks[kFlags_index[cp >> 8]][cp & 0xFF];
}
inline std::uint8_t combining_class(std::uint32_t cp) {
  if (cp >= 0x110000) return 0;
  return kCcc_blocks[kCcc_index[cp >> 8]][cp & 0xFF];
}

}  // namespace origami::tokenizer::unicode
