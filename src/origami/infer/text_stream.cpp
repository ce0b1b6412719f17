#include "origami/infer/text_stream.h"

#include <algorithm>

#include <fmt/format.h>

namespace origami::infer {

namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD, what decoders put for bad bytes

// The length of the UTF-8 sequence a lead byte starts (0: a continuation byte or not UTF-8).
int sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

}  // namespace

std::size_t complete_utf8_prefix(const std::string& s, std::size_t end) {
  // Only the last three bytes can belong to an unfinished character.
  for (std::size_t back = 1; back <= 3 && back <= end; ++back) {
    const auto c = static_cast<unsigned char>(s[end - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const int n = sequence_length(c);
    // A lead byte whose sequence runs past `end`, with only continuation bytes after it.
    return n > static_cast<int>(back) ? end - back : end;
  }
  return end;
}

TextStream::TextStream(const tokenizer::Tokenizer* tokenizer, std::vector<std::string> stops)
    : tokenizer_(tokenizer), stops_(std::move(stops)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
  for (const std::string& s : stops_) hold_ = std::max(hold_, s.size() - 1);
}

std::string TextStream::byte_piece(std::int32_t id) {
  return id >= 0 && id < 256 ? std::string(1, static_cast<char>(id)) : fmt::format("<{}>", id);
}

std::string TextStream::decoded() const {
  return tokenizer_ != nullptr ? tokenizer_->decode(ids_) : bytes_;
}

// Releases text()'s continuation up to `end` of the decoded text, if the decoded text still
// begins with what was released (a decoder that rewrote released text releases nothing more
// until finish()).
std::string TextStream::release_up_to(std::size_t end) {
  const std::string all = decoded();
  if (end <= released_.size() || all.compare(0, released_.size(), released_) != 0) return {};
  std::string piece = all.substr(released_.size(), end - released_.size());
  released_ += piece;
  return piece;
}

std::string TextStream::push(std::int32_t id) {
  if (stopped_) return {};
  ids_.push_back(id);
  if (tokenizer_ == nullptr) bytes_ += byte_piece(id);
  const std::string all = decoded();
  // A stop string can only be new where the text changed: search from just before it.
  const std::size_t from = released_.size() > hold_ ? released_.size() - hold_ : 0;
  std::size_t cut = std::string::npos;
  for (const std::string& s : stops_) cut = std::min(cut, all.find(s, from));
  if (cut != std::string::npos) {
    stopped_ = true;
    return release_up_to(cut);
  }
  // Hold back the longest tail that could be the start of a stop string.
  std::size_t end = all.size();
  for (std::size_t k = std::min(hold_, all.size()); k > 0; --k) {
    const bool starts_stop = std::any_of(stops_.begin(), stops_.end(), [&](const std::string& s) {
      return all.compare(all.size() - k, k, s, 0, k) == 0;
    });
    if (starts_stop) {
      end = all.size() - k;
      break;
    }
  }
  end = complete_utf8_prefix(all, end);
  if (end >= 3 && end == all.size() && all.compare(end - 3, 3, kReplacement) == 0) end -= 3;
  return release_up_to(end);
}

std::string TextStream::finish() {
  if (stopped_) return {};
  return release_up_to(decoded().size());
}

}  // namespace origami::infer
