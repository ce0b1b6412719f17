#include "origami/tokenizer/byte_level.h"

#include <array>

#include "origami/tokenizer/utf8.h"

namespace origami::tokenizer::byte_level {

namespace {

struct Tables {
  std::array<std::uint32_t, 256> char_of{};
  std::array<int, 324> byte_of{};  // every char_of value is below 256 + 68
  Tables() {
    byte_of.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool prints = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      char_of[b] = prints ? static_cast<std::uint32_t>(b) : static_cast<std::uint32_t>(256 + n++);
      byte_of[char_of[b]] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::uint32_t char_of_byte(unsigned char b) { return tables().char_of[b]; }

int byte_of_char(std::uint32_t cp) {
  return cp < tables().byte_of.size() ? tables().byte_of[cp] : -1;
}

std::optional<std::string> to_bytes(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (std::size_t i = 0; i < token.size();) {
    const int b = byte_of_char(utf8::next(token, i));
    if (b < 0) return std::nullopt;
    out.push_back(static_cast<char>(b));
  }
  return out;
}

std::string from_bytes(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) utf8::append(out, char_of_byte(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace origami::tokenizer::byte_level
