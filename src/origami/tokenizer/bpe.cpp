#include "origami/tokenizer/bpe.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "origami/tokenizer/byte_level.h"
#include "origami/tokenizer/utf8.h"

namespace origami::tokenizer {

using nlohmann::json;

namespace {

// A merge rule's two sides: "a b" (the older format) or ["a", "b"]; views into `m`.
// `place` is the model's; the rule's own place is made only for a message.
std::pair<std::string_view, std::string_view> merge_sides(const json& m, const JsonPlace& place,
                                                          std::size_t rank) {
  if (m.is_string()) {
    const std::string_view s = m.get_ref<const std::string&>();
    const std::size_t space = s.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == s.size())
      refuse(place.at("merges").at(rank), "is not a merge 'LEFT RIGHT'");
    return {s.substr(0, space), s.substr(space + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return {m[0].get_ref<const std::string&>(), m[1].get_ref<const std::string&>()};
  refuse(place.at("merges").at(rank), "is not a merge (\"LEFT RIGHT\" or [LEFT, RIGHT])");
}

}  // namespace

BpeModel::BpeModel(const json& config, const StringIdMap& vocab, bool byte_level,
                   const JsonPlace& place)
    : byte_level_(byte_level), vocab_(&vocab) {
  byte_fallback_ = optional_bool(config, "byte_fallback", place, false);
  fuse_unk_ = optional_bool(config, "fuse_unk", place, false);
  ignore_merges_ = optional_bool(config, "ignore_merges", place, false);
  if (const json* d = optional_field(config, "dropout"); d != nullptr && d->is_number() &&
                                                          d->get<double>() > 0)
    refuse(place.at("dropout"), "BPE dropout is not supported (it is for training)");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!optional_string(config, affix, place, "").empty())
      refuse(place.at(affix), "a non-empty affix is not supported");
  if (const std::string unk = optional_string(config, "unk_token", place, ""); !unk.empty()) {
    unk_id_ = find_id(vocab, unk);
    if (unk_id_ < 0) refuse(place.at("unk_token"), "'" + unk + "' is not in the vocabulary");
  }

  byte_id_.fill(-1);
  ascii_id_.fill(-1);
  if (byte_level_) {
    for (const auto& [text, id] : vocab)
      if (auto bytes = byte_level::to_bytes(text)) byte_vocab_.emplace(std::move(*bytes), id);
    for (int b = 0; b < 256; ++b) {
      byte_id_[b] = find_id(byte_vocab_, std::string(1, static_cast<char>(b)));
      if (byte_id_[b] < 0)
        refuse(place.at("vocab"),
               fmt::format("a byte-level vocabulary lacks the token of byte 0x{:02X}", b));
    }
  } else {
    for (int c = 0; c < 128; ++c) ascii_id_[c] = find_id(vocab, std::string(1, static_cast<char>(c)));
    if (byte_fallback_)
      for (int b = 0; b < 256; ++b) byte_id_[b] = find_id(vocab, fmt::format("<0x{:02X}>", b));
  }

  const json& merges = required_field(config, "merges", place);
  if (!merges.is_array()) refuse(place.at("merges"), "is not a list");
  merges_.reserve(merges.size());
  std::string joined;
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left, right] = merge_sides(merges[rank], place, rank);
    joined.assign(left);
    joined.append(right);
    const std::int32_t l = find_id(vocab, left), r = find_id(vocab, right),
                       m = find_id(vocab, joined);
    if (l < 0 || r < 0 || m < 0) continue;  // a rule that can never apply
    merges_.insert(l, r, {static_cast<std::uint32_t>(rank), m});
  }
}

void BpeModel::emit_unknown(std::string_view bytes, std::vector<std::int32_t>& out) const {
  if (byte_fallback_) {
    const bool all = std::all_of(bytes.begin(), bytes.end(), [&](char c) {
      return byte_id_[static_cast<unsigned char>(c)] >= 0;
    });
    if (all) {
      for (const char c : bytes) out.push_back(byte_id_[static_cast<unsigned char>(c)]);
      return;
    }
  }
  if (unk_id_ >= 0) out.push_back(unk_id_);  // without an unk token the piece is dropped
}

void BpeModel::merge(std::string_view piece, std::vector<std::int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<std::uint64_t> queue;  // rank << 32 | position, a min-heap
  symbols.clear();
  queue.clear();
  if (byte_level_) {
    for (std::size_t i = 0; i < piece.size(); ++i)
      symbols.push_back({byte_id_[static_cast<unsigned char>(piece[i])], 0, 0,
                         static_cast<std::uint32_t>(i), 1});
  } else {
    for (std::size_t i = 0; i < piece.size();) {
      const std::size_t start = i;
      const auto lead = static_cast<unsigned char>(piece[i]);
      std::int32_t id;
      if (lead < 0x80) {
        id = ascii_id_[lead];
        ++i;
      } else {
        i += static_cast<std::size_t>(utf8::sequence_length(lead));
        id = find_id(*vocab_, piece.substr(start, i - start));
      }
      symbols.push_back(
          {id, 0, 0, static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(i - start)});
    }
  }
  const auto n = static_cast<std::int32_t>(symbols.size());
  for (std::int32_t i = 0; i < n; ++i) {
    symbols[i].prev = i - 1;
    symbols[i].next = i + 1 < n ? i + 1 : -1;
  }
  const auto push = [&](std::int32_t pos) {
    const Symbol& s = symbols[pos];
    if (s.next < 0 || s.id < 0 || symbols[s.next].id < 0) return;
    if (const Merge* m = merges_.find(s.id, symbols[s.next].id)) {
      queue.push_back((static_cast<std::uint64_t>(m->rank) << 32) | static_cast<std::uint32_t>(pos));
      std::push_heap(queue.begin(), queue.end(), std::greater<>{});
    }
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), std::greater<>{});
    const std::uint64_t top = queue.back();
    queue.pop_back();
    const auto pos = static_cast<std::int32_t>(top & 0xFFFFFFFFu);
    Symbol& s = symbols[pos];
    if (s.length == 0 || s.next < 0) continue;
    Symbol& right = symbols[s.next];
    const Merge* m = right.id >= 0 && s.id >= 0 ? merges_.find(s.id, right.id) : nullptr;
    if (m == nullptr || m->rank != (top >> 32)) continue;  // a pair that has changed since
    s.id = m->id;
    s.length += right.length;
    right.length = 0;
    s.next = right.next;
    if (s.next >= 0) symbols[s.next].prev = pos;
    if (s.prev >= 0) push(s.prev);
    push(pos);
  }
  for (std::int32_t i = 0; i >= 0; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.id >= 0)
      out.push_back(s.id);
    else
      emit_unknown(piece.substr(s.start, s.length), out);
  }
}

void BpeModel::encode(std::string_view piece, std::vector<std::int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    const std::int32_t id = find_id(byte_level_ ? byte_vocab_ : *vocab_, piece);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const bool cacheable = piece.size() < kCacheMaxPiece;
  if (cacheable) {
    const auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t first = out.size();
  merge(piece, out);
  if (cacheable) {
    if (cache_.size() >= kCacheMaxEntries) cache_.clear();
    cache_.emplace(std::string(piece), std::vector<std::int32_t>(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
  }
}

}  // namespace origami::tokenizer
