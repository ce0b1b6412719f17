#include "origami/tokenizer/utf8.h"

namespace origami::tokenizer::utf8 {

namespace {

// Calls emit(code point, valid) for each code point or each maximal invalid subpart.
template <class Emit>
void decode(std::string_view s, Emit&& emit) {
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      emit(b0, i, 1);
      ++i;
      continue;
    }
    int needed = 0;
    unsigned char lower = 0x80, upper = 0xBF;
    std::uint32_t cp = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      needed = 1;
      cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      needed = 2;
      cp = b0 & 0x0F;
      if (b0 == 0xE0) lower = 0xA0;
      if (b0 == 0xED) upper = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      needed = 3;
      cp = b0 & 0x07;
      if (b0 == 0xF0) lower = 0x90;
      if (b0 == 0xF4) upper = 0x8F;
    } else {
      emit(kReplacement, i, 0);  // a byte that never starts a sequence
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    int seen = 0;
    while (seen < needed && j < n) {
      const auto b = static_cast<unsigned char>(s[j]);
      if (b < lower || b > upper) break;
      lower = 0x80;
      upper = 0xBF;
      cp = (cp << 6) | (b & 0x3F);
      ++seen;
      ++j;
    }
    // A complete sequence, or one replacement for the maximal subpart s[i, j).
    emit(seen == needed ? cp : kReplacement, i, seen == needed ? j - i : 0);
    i = j;
  }
}

}  // namespace

bool is_valid(std::string_view s) {
  bool valid = true;
  std::size_t i = 0;
  while (i < s.size() && static_cast<unsigned char>(s[i]) < 0x80) ++i;  // ASCII prefix
  if (i == s.size()) return true;
  decode(s.substr(i), [&](std::uint32_t, std::size_t, std::size_t len) { valid &= len > 0; });
  return valid;
}

std::string sanitize(std::string_view s) {
  if (is_valid(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 16);
  decode(s, [&](std::uint32_t cp, std::size_t at, std::size_t len) {
    if (len > 0)
      out.append(s.substr(at, len));
    else
      append(out, cp);
  });
  return out;
}

void append(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace origami::tokenizer::utf8
