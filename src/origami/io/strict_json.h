// JSON parsed with every key given twice in one object refused: nlohmann keeps the last of two
// equal keys without a word, so {"hidden_size": 64, ..., "hidden_size": 4096} would silently
// mean 4096. Syntax errors are nlohmann's exceptions, for the caller to word.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace origami::io {

// `on_duplicate(key)` is called for the first key repeated within one object and must throw
// (a ConfigError naming the file and the key).
nlohmann::json parse_json_refusing_duplicates(
    const std::string& text, const std::function<void(const std::string& key)>& on_duplicate);

}  // namespace origami::io
