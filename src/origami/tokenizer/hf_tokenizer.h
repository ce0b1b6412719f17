// A Hugging Face tokenizer.json with a BPE model: added tokens split out, then per stretch of
// text the normalizer, the pre-tokenizer and the BPE model (bpe.h); decoding through the
// decoder chain. Follows the reference library (Hugging Face's JavaScript tokenizers) step by
// step; docs/tokenizers.md says what is supported and how it is checked.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "origami/tokenizer/added_tokens.h"
#include "origami/tokenizer/bpe.h"
#include "origami/tokenizer/decoder.h"
#include "origami/tokenizer/normalizer.h"
#include "origami/tokenizer/pre_tokenizer.h"
#include "origami/tokenizer/string_map.h"
#include "origami/tokenizer/tokenizer.h"

namespace origami::tokenizer {

class HfTokenizer final : public Tokenizer {
 public:
  // Reads `path` (a tokenizer.json) and the tokenizer_config.json beside it, if any.
  explicit HfTokenizer(const std::string& path);
  HfTokenizer(const HfTokenizer&) = delete;  // the splitters and the model point into it
  HfTokenizer& operator=(const HfTokenizer&) = delete;

  std::string kind() const override;
  std::int64_t vocab_size() const override {
    return static_cast<std::int64_t>(id_to_token_.size());
  }
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const override;

  // The id of a token's text (the model's or an added token's), or -1.
  std::int32_t token_id(std::string_view text) const { return find_id(vocab_, text); }

 private:
  void encode_text(std::string_view text, std::size_t section, Pieces& pieces,
                   std::vector<std::int32_t>& out) const;
  void read_post_processor(const nlohmann::json* config, const JsonPlace& place);

  std::vector<AddedToken> added_;
  std::vector<AddedToken> normalized_added_;  // normalized added tokens, with normalized texts
  AddedTokenSplitter unnormalized_, normalized_;
  StringIdMap vocab_;                     // every token's text -> id
  std::vector<std::string> id_to_token_;  // by id
  std::vector<bool> known_, special_ids_;  // by id: a token at all; an added special token
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  Decoder decoder_;
  // The post-processor's template for one sequence: ids, with -1 where the sequence goes.
  std::optional<std::vector<std::int32_t>> template_;
  bool add_bos_ = false, add_eos_ = false;
};

}  // namespace origami::tokenizer
