#include "origami/tokenizer/decoder.h"

#include "origami/tokenizer/byte_level.h"
#include "origami/tokenizer/normalizer.h"
#include "origami/tokenizer/utf8.h"

namespace origami::tokenizer {

using nlohmann::json;

Decoder Decoder::from_json(const json* config, const JsonPlace& place,
                           std::unordered_set<std::string, StringHash, std::equal_to<>> added) {
  Decoder d;
  d.added_ = std::move(added);
  if (config != nullptr) {
    d.null_ = false;
    d.add(*config, place);
  }
  return d;
}

void Decoder::add(const json& config, const JsonPlace& place) {
  const std::string type = component_type(
      config, place, "Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace");
  if (type == "Sequence") {
    const json& list = required_field(config, "decoders", place);
    if (!list.is_array()) refuse(place.at("decoders"), "is not a list");
    for (std::size_t i = 0; i < list.size(); ++i) add(list[i], place.at("decoders").at(i));
  } else if (type == "ByteLevel") {
    steps_.push_back({Step::Type::ByteLevel, "", ""});
  } else if (type == "Replace") {
    steps_.push_back(
        {Step::Type::Replace, string_pattern(config, place), string_field(config, "content", place)});
  } else if (type == "ByteFallback") {
    steps_.push_back({Step::Type::ByteFallback, "", ""});
  } else if (type == "Fuse") {
    steps_.push_back({Step::Type::Fuse, "", ""});
  } else if (type == "Strip") {
    Step s{Step::Type::Strip, "", optional_string(config, "content", place, " ")};
    const std::int64_t start = optional_int(config, "start", place, 0);
    const std::int64_t stop = optional_int(config, "stop", place, 0);
    if (start < 0 || stop < 0) refuse(place, "Strip's start and stop must not be negative");
    s.start = static_cast<std::size_t>(start);
    s.stop = static_cast<std::size_t>(stop);
    steps_.push_back(s);
  } else {
    steps_.push_back(
        {Step::Type::Metaspace, "", optional_string(config, "replacement", place, "\u2581")});
  }
}

namespace {

// Bytes of consecutive <0x..> tokens as text (invalid sequences replaced).
void flush_bytes(std::string& bytes, std::vector<std::string>& out) {
  if (bytes.empty()) return;
  out.push_back(utf8::sanitize(bytes));
  bytes.clear();
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::vector<std::string> Decoder::apply(const Step& step, std::vector<std::string> tokens) const {
  std::vector<std::string> out;
  switch (step.type) {
    case Step::Type::ByteLevel: {
      std::string bytes;
      const auto flush = [&] {
        if (!bytes.empty()) out.push_back(utf8::sanitize(bytes));
        bytes.clear();
      };
      for (std::string& t : tokens) {
        if (added_.contains(t)) {
          flush();
          out.push_back(std::move(t));
          continue;
        }
        for (std::size_t i = 0; i < t.size();) {
          const int b = byte_level::byte_of_char(utf8::next(t, i));
          bytes.push_back(static_cast<char>(b < 0 ? 0 : b));  // as the reference: unknown -> 0
        }
      }
      flush();
      return out;
    }
    case Step::Type::Replace:
      for (std::string& t : tokens)
        out.push_back(t.find(step.pattern) == std::string::npos
                          ? std::move(t)
                          : replace_all(t, step.pattern, step.content));
      return out;
    case Step::Type::ByteFallback: {
      std::string bytes;
      for (std::string& t : tokens) {
        if (t.size() == 6 && t.starts_with("<0x") && t[5] == '>' && hex_digit(t[3]) >= 0 &&
            hex_digit(t[4]) >= 0) {
          bytes.push_back(static_cast<char>(hex_digit(t[3]) * 16 + hex_digit(t[4])));
          continue;
        }
        flush_bytes(bytes, out);
        out.push_back(std::move(t));
      }
      flush_bytes(bytes, out);
      return out;
    }
    case Step::Type::Fuse: {
      std::string all;
      for (const std::string& t : tokens) all += t;
      out.push_back(std::move(all));
      return out;
    }
    case Step::Type::Strip:
      for (std::string& t : tokens) {
        std::string_view v = t;
        const std::string_view c = step.content;
        for (std::size_t i = 0; i < step.start && !c.empty() && v.starts_with(c); ++i)
          v.remove_prefix(c.size());
        for (std::size_t i = 0; i < step.stop && !c.empty() && v.ends_with(c); ++i)
          v.remove_suffix(c.size());
        out.emplace_back(v);
      }
      return out;
    case Step::Type::Metaspace:
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        std::string t = replace_all(tokens[i], step.content, " ");
        if (i == 0 && t.starts_with(' ')) t.erase(0, 1);
        out.push_back(std::move(t));
      }
      return out;
  }
  return out;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (null_) {
    std::string joined;
    for (std::size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  for (const Step& step : steps_) tokens = apply(step, std::move(tokens));
  std::string text;
  for (const std::string& t : tokens) text += t;
  return text;
}

}  // namespace origami::tokenizer
