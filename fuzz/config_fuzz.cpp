// libFuzzer target for the config.json parser: any text must either give a validated
// configuration or throw origami::ConfigError; a crash, a sanitizer report or any other
// exception is a bug. Accepted configurations are written back and re-parsed: the round
// trip must give the same sizes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "origami/core/error.h"
#include "origami/model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    std::vector<std::string> warnings;
    const origami::ModelConfig c = origami::parse_model_config(text, &warnings);
    const origami::ModelConfig back =
        origami::parse_model_config(origami::model_config_to_json(c), nullptr);
    if (back.hidden_size != c.hidden_size || back.num_key_value_heads != c.num_key_value_heads ||
        back.rms_norm_eps != c.rms_norm_eps || back.vocab_size != c.vocab_size)
      std::abort();
  } catch (const origami::ConfigError&) {
    // Refusing bad input is the expected outcome.
  }
  return 0;
}
