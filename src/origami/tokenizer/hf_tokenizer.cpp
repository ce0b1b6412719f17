#include "origami/tokenizer/hf_tokenizer.h"

#include <filesystem>
#include <mutex>
#include <unordered_set>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/tokenizer/json_fields.h"
#include "origami/tokenizer/tokenizer_config.h"
#include "origami/tokenizer/utf8.h"

namespace origami::tokenizer {

using nlohmann::json;

HfTokenizer::HfTokenizer(const std::string& path) {
  const json root = read_json_file(path, "tokenizer.json");
  const JsonPlace place{path, ""};
  if (!root.is_object()) refuse(place, "is not a JSON object");

  const json& model = required_field(root, "model", place);
  const JsonPlace model_place = place.at("model");
  component_type(model, model_place, "BPE");
  const json& vocab = required_field(model, "vocab", model_place);
  if (!vocab.is_object()) refuse(model_place.at("vocab"), "is not an object of token -> id");
  // `where()` is the token's place, made only for a message.
  const auto set_token = [&](const std::string& text, std::int64_t id, auto&& where) {
    if (id < 0 || id >= (std::int64_t{1} << 31) - 1)
      refuse(where(), fmt::format("id {} is out of range", id));
    const auto i = static_cast<std::size_t>(id);
    if (i >= id_to_token_.size()) {
      id_to_token_.resize(i + 1);
      known_.resize(i + 1, false);
      special_ids_.resize(i + 1, false);
    }
    id_to_token_[i] = text;
    known_[i] = true;
    vocab_[text] = static_cast<std::int32_t>(id);
  };
  vocab_.reserve(vocab.size() + 1024);
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer()) refuse(model_place.at("vocab").at(text), "is not an integer id");
    set_token(text, id.get<std::int64_t>(), [&] { return model_place.at("vocab").at(text); });
  }

  if (const json* list = optional_field(root, "added_tokens")) {
    const JsonPlace at = place.at("added_tokens");
    if (!list->is_array()) refuse(at, "is not a list");
    added_.reserve(list->size());
    for (std::size_t i = 0; i < list->size(); ++i) {
      const json& t = (*list)[i];
      const JsonPlace ti = at.at(i);
      AddedToken a;
      a.content = string_field(t, "content", ti);
      const std::int64_t id = optional_int(t, "id", ti, -1);
      a.special = optional_bool(t, "special", ti, false);
      a.normalized = optional_bool(t, "normalized", ti, !a.special);
      a.lstrip = optional_bool(t, "lstrip", ti, false);
      a.rstrip = optional_bool(t, "rstrip", ti, false);
      set_token(a.content, id, [&] { return ti.at("id"); });
      a.id = static_cast<std::int32_t>(id);
      if (a.special) special_ids_[static_cast<std::size_t>(id)] = true;
      added_.push_back(std::move(a));
    }
  }

  normalizer_ = Normalizer::from_json(optional_field(root, "normalizer"), place.at("normalizer"));
  pre_tokenizer_ =
      PreTokenizer::from_json(optional_field(root, "pre_tokenizer"), place.at("pre_tokenizer"));
  model_ = std::make_unique<BpeModel>(model, vocab_, pre_tokenizer_.byte_level(), model_place);
  std::unordered_set<std::string, StringHash, std::equal_to<>> added_texts;
  std::vector<const AddedToken*> raw, normalized;
  for (const AddedToken& a : added_) {
    added_texts.insert(a.content);
    // A normalized added token is looked for in normalized text (as the reference does).
    (a.normalized && !normalizer_.identity() ? normalized : raw).push_back(&a);
  }
  unnormalized_ = AddedTokenSplitter(std::move(raw));
  if (!normalized.empty()) {
    // Their normalized texts are what appears in normalized text.
    normalized_added_.reserve(normalized.size());
    for (const AddedToken* a : normalized) {
      AddedToken n = *a;
      n.content = normalizer_.apply(a->content);
      normalized_added_.push_back(std::move(n));
    }
    std::vector<const AddedToken*> pointers;
    for (const AddedToken& a : normalized_added_) pointers.push_back(&a);
    normalized_ = AddedTokenSplitter(std::move(pointers));
  }
  decoder_ = Decoder::from_json(optional_field(root, "decoder"), place.at("decoder"),
                                std::move(added_texts));
  read_post_processor(optional_field(root, "post_processor"), place.at("post_processor"));

  const std::string dir = std::filesystem::path(path).parent_path().string();
  if (const auto config = read_tokenizer_config(dir.empty() ? "." : dir)) {
    special_ = resolve_special_tokens(
        *config, [&](std::string_view text) { return token_id(text); }, {});
    add_bos_ = config->add_bos.value_or(false) && special_.bos.has_value();
    add_eos_ = config->add_eos.value_or(false) && special_.eos.has_value();
  }
}

void HfTokenizer::read_post_processor(const json* config, const JsonPlace& place) {
  if (config == nullptr) return;
  const std::string type =
      component_type(*config, place, "TemplateProcessing, ByteLevel, Sequence");
  if (type == "ByteLevel") return;  // changes offsets only
  if (type == "Sequence") {
    const json& list = required_field(*config, "processors", place);
    if (!list.is_array()) refuse(place.at("processors"), "is not a list");
    for (std::size_t i = 0; i < list.size(); ++i)
      read_post_processor(&list[i], place.at("processors").at(i));
    return;
  }
  const json& single = required_field(*config, "single", place);
  if (!single.is_array()) refuse(place.at("single"), "is not a list");
  const json* specials = optional_field(*config, "special_tokens");
  std::vector<std::int32_t> t;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const JsonPlace at = place.at("single").at(i);
    if (optional_field(single[i], "Sequence") != nullptr) {
      t.push_back(-1);
      continue;
    }
    const json& special = required_field(single[i], "SpecialToken", at);
    const std::string name = string_field(special, "id", at.at("SpecialToken"));
    const json* entry = specials ? optional_field(*specials, name) : nullptr;
    if (entry == nullptr || optional_field(*entry, "ids") == nullptr) {
      const std::int32_t id = token_id(name);
      if (id < 0) refuse(at.at("SpecialToken").at("id"), "'" + name + "' is not a token");
      t.push_back(id);
      continue;
    }
    for (const json& id : (*entry)["ids"]) {
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
          id.get<std::int64_t>() >= vocab_size())
        refuse(place.at("special_tokens").at(name).at("ids"), "holds an id outside the vocabulary");
      t.push_back(id.get<std::int32_t>());
    }
  }
  template_ = std::move(t);
}

std::string HfTokenizer::kind() const {
  return pre_tokenizer_.byte_level() ? "tokenizer.json BPE (byte-level)"
                                     : "tokenizer.json BPE (SentencePiece-style)";
}

void HfTokenizer::encode_text(std::string_view text, std::size_t section, Pieces& pieces,
                              std::vector<std::int32_t>& out) const {
  pre_tokenizer_.apply(text, section, pieces);
  const std::size_t first = out.size();
  for (const std::string_view piece : pieces.views) model_->encode(piece, out);
  if (!model_->fuse_unk() || model_->unk_id() < 0) return;
  // Runs of unk become one unk.
  std::size_t w = first;
  for (std::size_t r = first; r < out.size(); ++r)
    if (!(out[r] == model_->unk_id() && w > first && out[w - 1] == model_->unk_id()))
      out[w++] = out[r];
  out.resize(w);
}

std::vector<std::int32_t> HfTokenizer::encode(std::string_view input,
                                              bool add_special_tokens) const {
  const std::string text = utf8::sanitize(input);
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Section> sections, subsections;
  Pieces pieces;
  unnormalized_.split(text, sections);
  std::lock_guard<std::mutex> lock(model_->cache_mutex());
  for (std::size_t k = 0; k < sections.size(); ++k) {
    const Section& s = sections[k];
    if (s.token != nullptr) {
      ids.push_back(s.token->id);
      continue;
    }
    if (s.text.empty()) continue;
    std::string normalized;
    std::string_view t = s.text;
    if (!normalizer_.identity()) {
      normalized = normalizer_.apply(t);
      t = normalized;
    }
    if (t.empty()) continue;
    if (normalized_.empty()) {
      encode_text(t, k, pieces, ids);
      continue;
    }
    normalized_.split(t, subsections);
    for (const Section& sub : subsections) {
      if (sub.token != nullptr)
        ids.push_back(sub.token->id);
      else if (!sub.text.empty())
        encode_text(sub.text, k, pieces, ids);
    }
  }
  if (!add_special_tokens) return ids;
  if (template_) {
    std::vector<std::int32_t> out;
    out.reserve(ids.size() + template_->size());
    for (const std::int32_t t : *template_)
      if (t < 0)
        out.insert(out.end(), ids.begin(), ids.end());
      else
        out.push_back(t);
    return out;
  }
  if (add_bos_) ids.insert(ids.begin(), *special_.bos);
  if (add_eos_) ids.push_back(*special_.eos);
  return ids;
}

std::string HfTokenizer::decode(std::span<const std::int32_t> ids,
                                bool skip_special_tokens) const {
  check_ids(ids, vocab_size(), "tokenizer.json");
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto id = static_cast<std::size_t>(ids[i]);
    if (!known_[id])
      throw ConfigError(fmt::format("tokenizer.json: token id {} (at position {}) is no token of "
                                    "the vocabulary",
                                    ids[i], i));
    if (skip_special_tokens && special_ids_[id]) continue;
    tokens.push_back(id_to_token_[id]);
  }
  return decoder_.decode(std::move(tokens));
}

}  // namespace origami::tokenizer
