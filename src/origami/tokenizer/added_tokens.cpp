#include "origami/tokenizer/added_tokens.h"

#include <algorithm>

namespace origami::tokenizer {

namespace {

// The length of the JavaScript whitespace (what the reference's trimStart / trimEnd remove:
// U+0009..000D, Zs, U+2028, U+2029, U+FEFF) that starts at s[i], or 0.
std::size_t js_space_at(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b == ' ' || (b >= 0x09 && b <= 0x0D)) return 1;
  const std::string_view rest = s.substr(i);
  for (std::string_view seq : {"\u00A0", "\u1680", "\u2028", "\u2029", "\u202F", "\u205F",
                               "\u3000", "\uFEFF"})
    if (rest.starts_with(seq)) return seq.size();
  if (rest.size() >= 3 && rest.starts_with("\xE2\x80") &&
      static_cast<unsigned char>(rest[2]) <= 0x8A)
    return 3;  // U+2000..U+200A
  return 0;
}

std::string_view trim_start(std::string_view s) {
  std::size_t n;
  while (!s.empty() && (n = js_space_at(s, 0)) > 0) s.remove_prefix(n);
  return s;
}

std::string_view trim_end(std::string_view s) {
  while (!s.empty()) {
    std::size_t i = s.size() - 1;  // the start of the last code point
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    if (js_space_at(s, i) != s.size() - i) break;
    s.remove_suffix(s.size() - i);
  }
  return s;
}

}  // namespace

AddedTokenSplitter::AddedTokenSplitter(std::vector<const AddedToken*> tokens)
    : tokens_(std::move(tokens)) {
  for (const AddedToken* t : tokens_)
    if (!t->content.empty())
      by_first_byte_[static_cast<unsigned char>(t->content[0])].push_back(t);
  for (auto& list : by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [](const AddedToken* a, const AddedToken* b) {
      return a->content.size() > b->content.size();
    });
}

void AddedTokenSplitter::split(std::string_view text, std::vector<Section>& out) const {
  out.clear();
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size();) {
    const AddedToken* match = nullptr;
    for (const AddedToken* t : by_first_byte_[static_cast<unsigned char>(text[i])])
      if (text.substr(i).starts_with(t->content)) {
        match = t;
        break;
      }
    if (match == nullptr) {
      ++i;
      continue;
    }
    if (i > start) out.push_back({text.substr(start, i - start), nullptr});
    out.push_back({text.substr(i, match->content.size()), match});
    i += match->content.size();
    start = i;
  }
  if (start < text.size()) out.push_back({text.substr(start), nullptr});
  // lstrip / rstrip: trim the neighbouring text sections.
  for (std::size_t k = 0; k < out.size(); ++k) {
    const AddedToken* t = out[k].token;
    if (t == nullptr) continue;
    if (t->lstrip && k > 0 && out[k - 1].token == nullptr) out[k - 1].text = trim_end(out[k - 1].text);
    if (t->rstrip && k + 1 < out.size() && out[k + 1].token == nullptr)
      out[k + 1].text = trim_start(out[k + 1].text);
  }
}

}  // namespace origami::tokenizer
