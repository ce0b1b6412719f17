// Reading a whole input file (--config, --data, --prompt-file, a checkpoint's index.json)
// with a size limit: /dev/zero or a 50 GB file given by mistake must fail with a message, not
// read until the machine runs out of memory. Errors are ConfigErrors naming the flag, the
// path and the operating system's reason.
#pragma once

#include <cstdint>
#include <string>

namespace origami::io {

// The limits (bytes) of the inputs that are read whole.
inline constexpr std::int64_t kConfigFileLimit = 16ll << 20;   // a config.json is a few KB
inline constexpr std::int64_t kPromptFileLimit = 64ll << 20;
inline constexpr std::int64_t kIndexFileLimit = 256ll << 20;   // index.json: ~1 KB per tensor
inline constexpr std::int64_t kDataFileLimit = 1ll << 30;      // 4 B per token once encoded

// The contents of `path`, at most `limit` bytes. `what` names the input in messages, e.g.
// "--data" or "config". A directory is refused as such; any other file (a pipe, a device) is
// read up to the limit.
std::string read_text_file(const std::string& path, std::int64_t limit, const std::string& what);

}  // namespace origami::io
