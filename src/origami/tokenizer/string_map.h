// Hash maps of the tokenizers: token text -> id (looked up by string_view without copying)
// and an open-addressing map of id pairs -> merge, the BPE inner loop's only lookup.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace origami::tokenizer {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};
using StringIdMap = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

// The id of `text` in `map`, or -1.
inline std::int32_t find_id(const StringIdMap& map, std::string_view text) {
  const auto it = map.find(text);
  return it == map.end() ? -1 : it->second;
}

struct Merge {
  std::uint32_t rank;
  std::int32_t id;  // the merged token
};

// (left id, right id) -> Merge, linear probing over a power-of-two table.
class PairMap {
 public:
  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    slots_.assign(cap, Slot{kEmpty, {}});
    mask_ = cap - 1;
  }
  // A pair inserted again takes the new merge (a repeated merge rule's last rank wins, as in
  // the Rust and JavaScript libraries).
  void insert(std::int32_t left, std::int32_t right, Merge merge) {
    const std::uint64_t key = pack(left, right);
    for (std::size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = {key, merge};
        return;
      }
      if (slots_[i].key == key) {
        slots_[i].merge = merge;
        return;
      }
    }
  }
  const Merge* find(std::int32_t left, std::int32_t right) const {
    const std::uint64_t key = pack(left, right);
    for (std::size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].merge;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  struct Slot {
    std::uint64_t key;
    Merge merge;
  };
  static std::uint64_t pack(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }
  static std::size_t hash(std::uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<std::size_t>(k);
  }
  std::vector<Slot> slots_ = std::vector<Slot>(16, Slot{kEmpty, {}});
  std::size_t mask_ = 15;
};

}  // namespace origami::tokenizer
