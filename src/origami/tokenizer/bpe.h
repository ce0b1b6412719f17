// The BPE model of a tokenizer.json: merges applied by rank (lowest first, leftmost among
// equals) with a priority queue over a linked list of symbols, a cache per pre-token, and the
// options of both kinds of vocabulary:
//   * byte-level (GPT-2, Llama 3, Qwen): the symbols start as the piece's bytes;
//   * SentencePiece-style (Llama 2, Mistral): the symbols start as its characters; a character
//     outside the vocabulary becomes its <0x..> byte tokens (byte_fallback) or unk, and runs of
//     unk fuse into one (fuse_unk);
//   * ignore_merges (Llama 3): a piece that is a token is that token.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "origami/tokenizer/json_fields.h"
#include "origami/tokenizer/string_map.h"

namespace origami::tokenizer {

class BpeModel {
 public:
  // `config` is tokenizer.json's "model"; `vocab` maps every token text (the model's and the
  // added tokens') to its id.
  BpeModel(const nlohmann::json& config, const StringIdMap& vocab, bool byte_level,
           const JsonPlace& place);

  // Appends the ids of `piece` (raw text; byte-level models map it to bytes themselves).
  // Not thread-safe: the caller holds cache_mutex() around a run of calls.
  void encode(std::string_view piece, std::vector<std::int32_t>& out) const;
  std::mutex& cache_mutex() const { return cache_mutex_; }

  bool byte_level() const { return byte_level_; }
  bool fuse_unk() const { return fuse_unk_; }
  std::int32_t unk_id() const { return unk_id_; }  // -1: none

 private:
  struct Symbol {
    std::int32_t id;  // -1: a character outside the vocabulary
    std::int32_t prev, next;
    std::uint32_t start, length;  // bytes of the piece; length 0: merged away
  };
  void merge(std::string_view piece, std::vector<std::int32_t>& out) const;
  void emit_unknown(std::string_view bytes, std::vector<std::int32_t>& out) const;

  bool byte_level_;
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  std::int32_t unk_id_ = -1;
  const StringIdMap* vocab_;       // text -> id (SentencePiece-style symbols)
  StringIdMap byte_vocab_;         // byte-level: raw bytes -> id (for ignore_merges)
  std::array<std::int32_t, 256> byte_id_{};  // byte-level: each byte's token; fallback: <0xXX>
  std::array<std::int32_t, 128> ascii_id_{};  // SentencePiece-style: each ASCII character's
  PairMap merges_;

  static constexpr std::size_t kCacheMaxPiece = 256, kCacheMaxEntries = 1 << 17;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>>
      cache_;
  mutable std::mutex cache_mutex_;
};

}  // namespace origami::tokenizer
