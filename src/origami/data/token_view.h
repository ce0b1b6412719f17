// A read-only run of token ids stored as little-endian uint16 or uint32 (a token file, mapped)
// or as int32 (text tokenized in memory), read as int32 for the batches.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace origami::data {

struct TokenView {
  const std::uint8_t* data = nullptr;
  int width = 4;            // bytes per token: 2 (uint16) or 4 (uint32 / int32)
  std::int64_t count = 0;   // tokens

  // Token i, 0 <= i < count. (The host is little-endian: x86-64, the only target.)
  std::int32_t at(std::int64_t i) const {
    if (width == 2) {
      std::uint16_t v;
      std::memcpy(&v, data + 2 * i, 2);
      return v;
    }
    std::int32_t v;
    std::memcpy(&v, data + 4 * i, 4);
    return v;
  }
  // Tokens [start, start + n) into out.
  void copy(std::int64_t start, std::int64_t n, std::int32_t* out) const {
    if (width == 4) {
      std::memcpy(out, data + 4 * start, static_cast<std::size_t>(n) * 4);
      return;
    }
    for (std::int64_t i = 0; i < n; ++i) out[i] = at(start + i);
  }
};

// The largest id of a view read as unsigned (a uint32 id above INT32_MAX, or an int32 id below
// 0, is the largest) and the first token that holds it.
struct LargestId {
  std::uint32_t id = 0;
  std::int64_t at = -1;  // -1: the view is empty
};
LargestId largest_id(const TokenView& v);

// Throws the ConfigError of a malformed token file: "token file 'FILE', byte offset N: WHAT".
[[noreturn]] void refuse_token_file(const std::string& file, std::uint64_t offset,
                                    const std::string& what);

// Document offsets of a stream whose documents each end with an `eos` token (--eos-id): the
// eos belongs to the document it ends, so a document starts after each eos; tokens after the
// last eos are a last document. 0 = o[0] < ... < o[D] = v.count (empty for an empty view).
std::vector<std::int64_t> documents_ending_at(const TokenView& v, std::uint32_t eos);

}  // namespace origami::data
