#include "origami/tokenizer/split_pattern.h"

#include <cstdint>
#include <string>

#include "origami/tokenizer/unicode_tables.h"
#include "origami/tokenizer/utf8.h"

namespace origami::tokenizer {

namespace {

constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt4Head = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|)";
constexpr std::string_view kGpt4Tail = R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

using unicode::kLetter;
using unicode::kNumber;
using unicode::kSpace;

// The text as code points: their flags, their values and where each starts in the text.
struct Decoded {
  std::vector<std::uint32_t> cp;
  std::vector<std::uint8_t> flags;
  std::vector<std::uint32_t> offset;  // size() + 1 entries
  void assign(std::string_view text) {
    cp.clear();
    flags.clear();
    offset.clear();
    for (std::size_t i = 0; i < text.size();) {
      offset.push_back(static_cast<std::uint32_t>(i));
      const auto b = static_cast<unsigned char>(text[i]);
      const std::uint32_t c = b < 0x80 ? (++i, b) : utf8::next(text, i);
      cp.push_back(c);
      flags.push_back(unicode::flags(c));
    }
    offset.push_back(static_cast<std::uint32_t>(text.size()));
  }
};

bool is_letter(std::uint8_t f) { return (f & kLetter) != 0; }
bool is_number(std::uint8_t f) { return (f & kNumber) != 0; }
bool is_space(std::uint8_t f) { return (f & kSpace) != 0; }
bool is_other(std::uint8_t f) { return (f & (kLetter | kNumber | kSpace)) == 0; }

// 's 't 're 've 'm 'll 'd at i: the length matched, or 0.
std::size_t contraction(const Decoded& d, std::size_t i, bool fold) {
  const std::size_t n = d.cp.size();
  if (d.cp[i] != '\'' || i + 1 >= n) return 0;
  const auto lower = [&](std::size_t k) -> std::uint32_t {
    const std::uint32_t c = d.cp[k];
    return fold && c >= 'A' && c <= 'Z' ? c + 32 : c;
  };
  const std::uint32_t a = lower(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= n) return 0;
  const std::uint32_t b = lower(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

template <class Pred>
std::size_t run(const Decoded& d, std::size_t i, Pred pred) {
  std::size_t j = i;
  while (j < d.cp.size() && pred(d.flags[j])) ++j;
  return j;
}

// \s+(?!\S) then \s+, at whitespace i whose run ends at q.
std::size_t trailing_space(const Decoded& d, std::size_t i, std::size_t q) {
  if (q == d.cp.size() || q - i < 2) return q - i;
  return q - i - 1;
}

std::size_t match_gpt2(const Decoded& d, std::size_t i) {
  if (const std::size_t c = contraction(d, i, false)) return c;
  const std::size_t n = d.cp.size();
  const std::size_t j = i + (d.cp[i] == ' ' && i + 1 < n ? 1 : 0);
  const std::uint8_t f = d.flags[j];
  if (is_letter(f)) return run(d, j, is_letter) - i;
  if (is_number(f)) return run(d, j, is_number) - i;
  if (is_other(f)) return run(d, j, is_other) - i;
  return trailing_space(d, i, run(d, i, is_space));
}

std::size_t match_gpt4(const Decoded& d, std::size_t i, int max_digits) {
  if (const std::size_t c = contraction(d, i, true)) return c;
  const std::size_t n = d.cp.size();
  const std::uint8_t f = d.flags[i];
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (is_letter(f)) return run(d, i, is_letter) - i;
  const bool crlf = d.cp[i] == '\r' || d.cp[i] == '\n';
  if (!crlf && !is_number(f) && i + 1 < n && is_letter(d.flags[i + 1]))
    return run(d, i + 1, is_letter) - i;
  // \p{N}{1,n}
  if (is_number(f)) {
    std::size_t j = i;
    while (j < n && is_number(d.flags[j]) && j - i < static_cast<std::size_t>(max_digits)) ++j;
    return j - i;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  const std::size_t k = i + (d.cp[i] == ' ' && i + 1 < n ? 1 : 0);
  if (is_other(d.flags[k])) {
    std::size_t j = run(d, k, is_other);
    while (j < n && (d.cp[j] == '\r' || d.cp[j] == '\n')) ++j;
    return j - i;
  }
  // \s*[\r\n]+ : up to the last \r or \n of the whitespace run, then \s+(?!\S), \s+
  const std::size_t q = run(d, i, is_space);
  for (std::size_t j = q; j > i; --j)
    if (d.cp[j - 1] == '\r' || d.cp[j - 1] == '\n') return j - i;
  return trailing_space(d, i, q);
}

}  // namespace

std::optional<SplitPattern> SplitPattern::recognize(std::string_view regex) {
  if (regex == kGpt2) return gpt2();
  if (regex.starts_with(kGpt4Head) && regex.ends_with(kGpt4Tail)) {
    const std::string_view digits =
        regex.substr(kGpt4Head.size(), regex.size() - kGpt4Head.size() - kGpt4Tail.size());
    if (digits == R"(\p{N})") return SplitPattern(Kind::Gpt4, 1);
    for (int k = 1; k <= 9; ++k)
      if (digits == R"(\p{N}{1,)" + std::to_string(k) + "}") return SplitPattern(Kind::Gpt4, k);
  }
  return std::nullopt;
}

void SplitPattern::split(std::string_view text, std::vector<std::string_view>& out) const {
  thread_local Decoded d;
  d.assign(text);
  const std::size_t n = d.cp.size();
  for (std::size_t i = 0; i < n;) {
    std::size_t len = kind_ == Kind::Gpt2 ? match_gpt2(d, i) : match_gpt4(d, i, max_digits_);
    if (len == 0) len = 1;  // unreachable: every position matches an alternative
    out.push_back(text.substr(d.offset[i], d.offset[i + len] - d.offset[i]));
    i += len;
  }
}

}  // namespace origami::tokenizer
