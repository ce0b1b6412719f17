// Unicode Normalization Form C (canonical decomposition, canonical ordering, canonical
// composition) over the tables of unicode_tables.h; the tokenizer.json normalizer "NFC".
#pragma once

#include <string>
#include <string_view>

namespace origami::tokenizer {

// `text` (valid UTF-8) in NFC. Text made only of code points that NFC leaves alone whatever
// surrounds them (most text) is returned as it is, without decomposing.
std::string nfc(std::string_view text);

}  // namespace origami::tokenizer
