#include "origami/tokenizer/fingerprint.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/core/hash.h"
#include "origami/tokenizer/tokenizer.h"

namespace origami::tokenizer {

std::optional<Fingerprint> fingerprint(const std::string& path) {
  if (path.empty() || path == "byte") return std::nullopt;
  const std::string file =
      std::filesystem::absolute(tokenizer_file(path)).lexically_normal().string();
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    throw ConfigError(fmt::format("tokenizer: cannot read '{}'", file));
  return Fingerprint{file, fmt::format("{:016x}", fnv1a64(bytes.data(), bytes.size()))};
}

}  // namespace origami::tokenizer
