#include "origami/data/token_view.h"

#include <algorithm>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::data {

namespace {
// One pass for the maximum (vectorizes), a second one only over the prefix that holds it.
template <typename T>
LargestId largest_of(const std::uint8_t* bytes, std::int64_t n) {
  // The mapping is page-aligned and the widths divide a page: the cast is aligned.
  const T* p = reinterpret_cast<const T*>(bytes);
  if (n == 0) return {};
  T m = 0;
  for (std::int64_t i = 0; i < n; ++i) m = std::max(m, p[i]);
  const std::int64_t at = std::find(p, p + n, m) - p;
  return {static_cast<std::uint32_t>(m), at};
}
}  // namespace

LargestId largest_id(const TokenView& v) {
  if (v.width == 2) return largest_of<std::uint16_t>(v.data, v.count);
  return largest_of<std::uint32_t>(v.data, v.count);
}

void refuse_token_file(const std::string& file, std::uint64_t offset, const std::string& what) {
  throw ConfigError(fmt::format("token file '{}', byte offset {}: {}", file, offset, what));
}

std::vector<std::int64_t> documents_ending_at(const TokenView& v, std::uint32_t eos) {
  std::vector<std::int64_t> offsets;
  if (v.count == 0) return offsets;
  offsets.push_back(0);
  for (std::int64_t i = 0; i + 1 < v.count; ++i)
    if (static_cast<std::uint32_t>(v.at(i)) == eos) offsets.push_back(i + 1);
  offsets.push_back(v.count);
  return offsets;
}

}  // namespace origami::data
