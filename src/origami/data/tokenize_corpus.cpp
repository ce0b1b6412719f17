#include "origami/data/tokenize_corpus.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "origami/core/error.h"
#include "origami/data/token_file.h"
#include "origami/io/text_file.h"
#include "origami/core/hash.h"

namespace origami::data {

namespace fs = std::filesystem;

std::uint64_t tokenizer_identity(const std::string& path) {
  if (path == "byte") return fnv1a64("byte", 4);
  fs::path file = path;
  if (fs::is_directory(file))
    file = fs::is_regular_file(file / "tokenizer.json") ? file / "tokenizer.json"
                                                        : file / "tokenizer.model";
  static constexpr std::int64_t kTokenizerFileLimit = 1ll << 30;
  const std::string bytes = io::read_text_file(file.string(), kTokenizerFileLimit, "--tokenizer");
  return fnv1a64(bytes.data(), bytes.size());
}

namespace {

bool blank(const std::string& line) { return line.empty() || line == "\r"; }

// The "text" of JSON line `number` (1-based) of `input`.
std::string jsonl_text(const std::string& line, std::int64_t number, std::int64_t offset,
                       const std::string& input) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(fmt::format("--input '{}', line {} (byte offset {}): not JSON ({})", input,
                                  number, offset, e.what()));
  }
  if (!j.is_object() || !j.contains("text") || !j.at("text").is_string())
    throw ConfigError(fmt::format("--input '{}', line {} (byte offset {}): expected a JSON "
                                  "object with a string field \"text\"",
                                  input, number, offset));
  return j.at("text").get<std::string>();
}

}  // namespace

CorpusStats tokenize_corpus(const tokenizer::Tokenizer& tokenizer, std::uint64_t tokenizer_id,
                            const std::string& input, const std::string& prefix) {
  const auto start = std::chrono::steady_clock::now();
  if (fs::is_directory(input))
    throw ConfigError(fmt::format("--input: '{}' is a directory; give a .txt or .jsonl file",
                                  input));
  std::ifstream in(input, std::ios::binary);
  if (!in)
    throw ConfigError(fmt::format("--input: cannot open '{}': {}", input, std::strerror(errno)));
  if (prefix.empty()) throw ConfigError("--out: give the PREFIX of the token files to write");
  const fs::path parent = fs::path(prefix).parent_path();
  if (!parent.empty() && !fs::is_directory(parent))
    throw ConfigError(fmt::format("--out '{}': the folder '{}' does not exist", prefix,
                                  parent.string()));

  TokenFileWriter writer(prefix, tokenizer.vocab_size(), tokenizer_id);
  const std::optional<std::int32_t> eos = tokenizer.special_tokens().eos;
  CorpusStats stats;
  stats.width = token_width(tokenizer.vocab_size());
  auto add = [&](const std::string& text) {
    std::vector<std::int32_t> ids = tokenizer.encode(text);
    if (eos) ids.push_back(*eos);
    stats.bytes += static_cast<std::int64_t>(text.size());
    if (ids.empty()) {
      ++stats.skipped;
      return;
    }
    writer.add_document(ids);
  };
  const bool jsonl = fs::path(input).extension() == ".jsonl";
  std::string line, document;
  bool open_document = false;
  std::int64_t number = 0, offset = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::int64_t line_offset = offset;
    offset += static_cast<std::int64_t>(line.size()) + 1;
    if (jsonl) {
      if (!blank(line)) add(jsonl_text(line, number, line_offset, input));
    } else if (blank(line)) {
      if (open_document) add(document);
      document.clear();
      open_document = false;
    } else {
      if (open_document) document += '\n';
      document += line;
      open_document = true;
    }
  }
  if (in.bad())
    throw ConfigError(fmt::format("--input: reading '{}' failed: {}", input, std::strerror(errno)));
  if (open_document) add(document);
  if (writer.documents() == 0)
    throw ConfigError(fmt::format("--input '{}' holds no document with any token ({} skipped); "
                                  "give a file with text",
                                  input, stats.skipped));
  writer.finish();
  stats.documents = writer.documents();
  stats.tokens = writer.tokens();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace origami::data
