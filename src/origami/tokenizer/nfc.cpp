#include "origami/tokenizer/nfc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "origami/tokenizer/unicode_tables.h"
#include "origami/tokenizer/utf8.h"

namespace origami::tokenizer {

namespace {

// Hangul syllables are composed and decomposed by arithmetic (Unicode 3.12).
constexpr std::uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr std::uint32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr std::uint32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

void decompose(std::uint32_t cp, std::vector<std::uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const std::uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto* end = unicode::kDecompositions + unicode::kDecompositionCount;
  const auto* it = std::lower_bound(
      unicode::kDecompositions, end, cp,
      [](const unicode::Decomposition& d, std::uint32_t c) { return d.code_point < c; });
  if (it == end || it->code_point != cp) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), unicode::kDecompositionData + it->offset,
             unicode::kDecompositionData + it->offset + it->length);
}

// The primary composite of (a, b), or 0.
std::uint32_t compose(std::uint32_t a, std::uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  const std::uint64_t key = (static_cast<std::uint64_t>(a) << 21) | b;
  const auto* end = unicode::kCompositions + unicode::kCompositionCount;
  const auto* it =
      std::lower_bound(unicode::kCompositions, end, key,
                       [](const unicode::Composition& c, std::uint64_t k) { return c.pair < k; });
  return it != end && it->pair == key ? it->composite : 0;
}

}  // namespace

std::string nfc(std::string_view text) {
  bool unchanged = true;
  for (std::size_t i = 0; i < text.size() && unchanged;) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    unchanged = (unicode::flags(utf8::next(text, i)) & unicode::kNfcUnsafe) == 0;
  }
  if (unchanged) return std::string(text);

  std::vector<std::uint32_t> cps;
  cps.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) decompose(utf8::next(text, i), cps);
  // Canonical ordering: each run of non-starters sorted (stably) by combining class.
  for (std::size_t i = 0; i < cps.size();) {
    if (unicode::combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < cps.size() && unicode::combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + static_cast<std::ptrdiff_t>(i),
                     cps.begin() + static_cast<std::ptrdiff_t>(j),
                     [](std::uint32_t a, std::uint32_t b) {
                       return unicode::combining_class(a) < unicode::combining_class(b);
                     });
    i = j;
  }
  // Canonical composition (the sample algorithm of UAX #15).
  std::vector<std::uint32_t> out;
  out.reserve(cps.size());
  std::size_t starter = 0;
  bool have_starter = false;  // non-starters before the first starter compose with nothing
  int last_class = 0;
  for (const std::uint32_t cp : cps) {
    const int cls = unicode::combining_class(cp);
    if (have_starter && (last_class < cls || last_class == 0)) {
      if (const std::uint32_t composite = compose(out[starter], cp)) {
        out[starter] = composite;
        continue;
      }
    }
    if (cls == 0) {
      starter = out.size();
      have_starter = true;
    }
    last_class = cls;
    out.push_back(cp);
  }
  std::string result;
  result.reserve(text.size());
  for (const std::uint32_t cp : out) utf8::append(result, cp);
  return result;
}

}  // namespace origami::tokenizer
