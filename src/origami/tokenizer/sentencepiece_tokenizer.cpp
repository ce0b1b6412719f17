#include "origami/tokenizer/sentencepiece_tokenizer.h"

#include <filesystem>

#include <fmt/format.h>
#include <sentencepiece_processor.h>

#include "origami/core/error.h"
#include "origami/tokenizer/tokenizer_config.h"

namespace origami::tokenizer {

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path)
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()), path_(path) {
  const auto status = processor_->Load(path);
  if (!status.ok())
    throw ConfigError(fmt::format("tokenizer: '{}' is not a SentencePiece model: {}", path,
                                  status.ToString()));
  const auto id = [](int v) { return v >= 0 ? std::optional<std::int32_t>(v) : std::nullopt; };
  special_ = {id(processor_->bos_id()), id(processor_->eos_id()), id(processor_->pad_id())};
  const std::string dir = std::filesystem::path(path).parent_path().string();
  if (const auto config = read_tokenizer_config(dir.empty() ? "." : dir)) {
    special_ = resolve_special_tokens(
        *config,
        [&](std::string_view text) {
          const int i = processor_->PieceToId(text);
          // PieceToId answers unk for an unknown piece: unk only when it is unk's own text.
          return i == processor_->unk_id() && processor_->IdToPiece(i) != text ? -1 : i;
        },
        special_);
    add_bos_ = config->add_bos.value_or(true);
    add_eos_ = config->add_eos.value_or(false);
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::int64_t SentencePieceTokenizer::vocab_size() const { return processor_->GetPieceSize(); }

std::vector<std::int32_t> SentencePieceTokenizer::encode(std::string_view text,
                                                         bool add_special_tokens) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  if (!status.ok())
    throw Error(fmt::format("tokenizer {}: encoding failed: {}", path_, status.ToString()));
  std::vector<std::int32_t> out;
  out.reserve(ids.size() + 2);
  if (add_special_tokens && add_bos_ && special_.bos) out.push_back(*special_.bos);
  out.insert(out.end(), ids.begin(), ids.end());
  if (add_special_tokens && add_eos_ && special_.eos) out.push_back(*special_.eos);
  return out;
}

std::string SentencePieceTokenizer::decode(std::span<const std::int32_t> ids,
                                           bool skip_special_tokens) const {
  check_ids(ids, vocab_size(), "SentencePiece");
  std::vector<int> v;
  v.reserve(ids.size());
  for (const std::int32_t id : ids)
    if (!skip_special_tokens || !(processor_->IsControl(id)))
      v.push_back(id);
  std::string text;
  const auto status = processor_->Decode(v, &text);
  if (!status.ok())
    throw Error(fmt::format("tokenizer {}: decoding failed: {}", path_, status.ToString()));
  return text;
}

}  // namespace origami::tokenizer
