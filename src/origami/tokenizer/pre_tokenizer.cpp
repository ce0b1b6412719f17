#include "origami/tokenizer/pre_tokenizer.h"

#include "origami/tokenizer/normalizer.h"

namespace origami::tokenizer {

using nlohmann::json;

PreTokenizer PreTokenizer::from_json(const json* config, const JsonPlace& place) {
  PreTokenizer p;
  if (config != nullptr) p.add(*config, place);
  return p;
}

void PreTokenizer::add(const json& config, const JsonPlace& place) {
  const std::string type =
      component_type(config, place, "Sequence, Split, ByteLevel, Digits, Metaspace");
  if (byte_level_) refuse(place, "a pre-tokenizer after ByteLevel is not supported");
  if (type == "Sequence") {
    const json& list = required_field(config, "pretokenizers", place);
    if (!list.is_array()) refuse(place.at("pretokenizers"), "is not a list");
    for (std::size_t i = 0; i < list.size(); ++i) add(list[i], place.at("pretokenizers").at(i));
    return;
  }
  Step step{};
  if (type == "Split") {
    step.type = Step::Type::Split;
    const json& pattern = required_field(config, "pattern", place);
    const JsonPlace at = place.at("pattern");
    const std::string regex = string_field(pattern, "Regex", at);
    step.pattern = SplitPattern::recognize(regex);
    if (!step.pattern)
      refuse(at.at("Regex"),
             "is a split pattern Origami does not know (it knows GPT-2's and the Llama 3 / "
             "Qwen one, split_pattern.h)");
    const std::string behavior = optional_string(config, "behavior", place, "Isolated");
    if (behavior != "Isolated")
      refuse(place.at("behavior"), "is '" + behavior + "'; only Isolated is supported");
    if (optional_bool(config, "invert", place, false))
      refuse(place.at("invert"), "true is not supported");
  } else if (type == "ByteLevel") {
    step.type = Step::Type::ByteLevel;
    step.add_prefix_space = optional_bool(config, "add_prefix_space", place, false);
    if (optional_bool(config, "use_regex", place, true)) step.pattern = SplitPattern::gpt2();
    byte_level_ = true;
  } else if (type == "Digits") {
    step.type = Step::Type::Digits;
    step.individual_digits = optional_bool(config, "individual_digits", place, false);
  } else {
    step.type = Step::Type::Metaspace;
    step.replacement = optional_string(config, "replacement", place, "\u2581");
    const json* scheme = optional_field(config, "prepend_scheme");
    if (scheme != nullptr) {
      const std::string s = optional_string(config, "prepend_scheme", place, "always");
      if (s == "always")
        step.prepend = Step::Prepend::Always;
      else if (s == "first")
        step.prepend = Step::Prepend::First;
      else if (s == "never")
        step.prepend = Step::Prepend::Never;
      else
        refuse(place.at("prepend_scheme"), "is '" + s + "'; expected always, first or never");
    } else {
      step.prepend = optional_bool(config, "add_prefix_space", place, true) ? Step::Prepend::Always
                                                                          : Step::Prepend::Never;
    }
    step.split = optional_bool(config, "split", place, false);
  }
  steps_.push_back(std::move(step));
}

void PreTokenizer::apply_step(const Step& step, std::string_view piece, std::size_t section,
                              Pieces& out) const {
  switch (step.type) {
    case Step::Type::Split:
      step.pattern->split(piece, out.views);
      return;
    case Step::Type::ByteLevel:
      if (step.add_prefix_space && !piece.starts_with(' ')) {
        std::string prefixed;
        prefixed.reserve(piece.size() + 1);
        prefixed.push_back(' ');
        prefixed.append(piece);
        out.owned.push_back(std::move(prefixed));
        piece = out.owned.back();
      }
      if (step.pattern)
        step.pattern->split(piece, out.views);
      else
        out.views.push_back(piece);
      return;
    case Step::Type::Digits: {
      // [^0-9]+|[0-9] (or [0-9]+): ASCII digits, as the reference's \d.
      const auto digit = [](char c) { return c >= '0' && c <= '9'; };
      for (std::size_t i = 0; i < piece.size();) {
        std::size_t j = i + 1;
        if (!digit(piece[i]))
          while (j < piece.size() && !digit(piece[j])) ++j;
        else if (!step.individual_digits)
          while (j < piece.size() && digit(piece[j])) ++j;
        out.views.push_back(piece.substr(i, j - i));
        i = j;
      }
      return;
    }
    case Step::Type::Metaspace: {
      std::string s = replace_all(piece, " ", step.replacement);
      const bool prepend = step.prepend == Step::Prepend::Always ||
                           (step.prepend == Step::Prepend::First && section == 0);
      if (prepend && !std::string_view(s).starts_with(step.replacement)) s = prepended(step.replacement, s);
      out.owned.push_back(std::move(s));
      const std::string_view t = out.owned.back();
      if (!step.split) {
        out.views.push_back(t);
        return;
      }
      // Each piece starts at a replacement (the Rust library's split: true).
      std::size_t start = 0;
      for (std::size_t at = t.find(step.replacement, 1); at != std::string_view::npos;
           at = t.find(step.replacement, at + 1)) {
        out.views.push_back(t.substr(start, at - start));
        start = at;
      }
      out.views.push_back(t.substr(start));
      return;
    }
  }
}

void PreTokenizer::apply(std::string_view text, std::size_t section, Pieces& out) const {
  out.clear();
  out.views.push_back(text);
  thread_local std::vector<std::string_view> next;
  for (const Step& step : steps_) {
    std::swap(next, out.views);
    out.views.clear();
    for (const std::string_view piece : next) apply_step(step, piece, section, out);
  }
}

}  // namespace origami::tokenizer
