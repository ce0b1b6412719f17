#include "origami/tokenizer/tokenizer.h"

#include <filesystem>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/tokenizer/byte_tokenizer.h"
#include "origami/tokenizer/hf_tokenizer.h"
#include "origami/tokenizer/sentencepiece_tokenizer.h"

namespace origami::tokenizer {

namespace fs = std::filesystem;

std::string tokenizer_file(const std::string& path) {
  std::string file = path;
  if (fs::is_directory(path)) {
    if (fs::is_regular_file(fs::path(path) / "tokenizer.json"))
      file = (fs::path(path) / "tokenizer.json").string();
    else if (fs::is_regular_file(fs::path(path) / "tokenizer.model"))
      file = (fs::path(path) / "tokenizer.model").string();
    else
      throw ConfigError(fmt::format(
          "tokenizer: the folder '{}' holds neither tokenizer.json nor tokenizer.model", path));
  } else if (!fs::is_regular_file(path)) {
    throw ConfigError(fmt::format(
        "tokenizer: '{}' is no file (give \"byte\", a tokenizer.json, a SentencePiece .model or "
        "a folder holding one)",
        path));
  }
  return file;
}

std::unique_ptr<Tokenizer> load(const std::string& path) {
  if (path == "byte") return std::make_unique<ByteTokenizer>();
  const std::string file = tokenizer_file(path);
  if (fs::path(file).extension() == ".json") return std::make_unique<HfTokenizer>(file);
  return std::make_unique<SentencePieceTokenizer>(file);
}

void check_ids(std::span<const std::int32_t> ids, std::int64_t vocab_size, std::string_view who) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw ConfigError(fmt::format("{}: token id {} (at position {}) is outside the vocabulary "
                                    "(0..{})",
                                    who, ids[i], i, vocab_size - 1));
}

}  // namespace origami::tokenizer
