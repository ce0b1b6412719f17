// Added tokens (special or not) are split out of the text before the normalizer and the model:
// scanning left to right, the longest added token that starts at a position is taken, as the
// reference does. lstrip / rstrip trim the whitespace beside a token.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace origami::tokenizer {

struct AddedToken {
  std::string content;
  std::int32_t id = 0;
  bool special = false, normalized = false, lstrip = false, rstrip = false;
};

// A stretch of text: an added token, or text for the model (token null).
struct Section {
  std::string_view text;
  const AddedToken* token = nullptr;
};

class AddedTokenSplitter {
 public:
  AddedTokenSplitter() = default;
  explicit AddedTokenSplitter(std::vector<const AddedToken*> tokens);
  bool empty() const { return tokens_.empty(); }
  // The sections of `text`, with lstrip / rstrip applied to the text beside each token.
  void split(std::string_view text, std::vector<Section>& out) const;

 private:
  std::vector<const AddedToken*> tokens_;
  std::array<std::vector<const AddedToken*>, 256> by_first_byte_;  // longest first
};

}  // namespace origami::tokenizer
