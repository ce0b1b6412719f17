// What a checkpoint records of the tokenizer its run was trained with: the file load() reads
// and an FNV-1a 64 hash of its bytes, so that `generate --checkpoint` can use the same
// tokenizer without being told, and say so when the file has changed since (docs/models.md,
// "The checkpoint's tokenizer").
#pragma once

#include <optional>
#include <string>

namespace origami::tokenizer {

struct Fingerprint {
  std::string file;     // absolute path of the tokenizer.json / .model
  std::string fnv1a64;  // 16 hex digits of its content
};

// The fingerprint of the tokenizer at `path` (as load() takes it); nullopt for "" and "byte"
// (bytes need no file). ConfigError as load() for a path that names no tokenizer file.
std::optional<Fingerprint> fingerprint(const std::string& path);

}  // namespace origami::tokenizer
