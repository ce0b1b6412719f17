// generation_config.json of a Hugging Face model folder: the end-of-sequence token(s) that
// stop generation. eos_token_id is an integer or a list of integers (Llama 3.1 lists three).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace origami::io {

// The eos ids of `path` (empty when the field is absent or null). ConfigError naming the file
// and the field for anything else, or for an id outside 0 .. vocab_size - 1.
std::vector<std::int32_t> read_eos_token_ids(const std::string& path, std::int64_t vocab_size);

}  // namespace origami::io
