// tokenizer_config.json (beside tokenizer.json or tokenizer.model): the names of the bos /
// eos / pad tokens and whether a sequence starts with bos or ends with eos.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "origami/tokenizer/tokenizer.h"

namespace origami::tokenizer {

struct TokenizerConfig {
  std::string path;
  std::optional<std::string> bos, eos, pad;  // token texts
  std::optional<bool> add_bos, add_eos;      // add_bos_token, add_eos_token
};

// The tokenizer_config.json in folder `dir`, or nothing when there is none.
std::optional<TokenizerConfig> read_tokenizer_config(const std::string& dir);

// The ids of the configured special tokens; `id_of(text)` is a token's id or -1. A configured
// name that is no token is a ConfigError naming the file and field. Tokens the configuration
// does not name keep `fallback`'s.
SpecialTokens resolve_special_tokens(const TokenizerConfig& config,
                                     const std::function<std::int32_t(std::string_view)>& id_of,
                                     SpecialTokens fallback);

}  // namespace origami::tokenizer
