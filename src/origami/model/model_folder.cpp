#include "origami/model/model_folder.h"

#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "origami/core/error.h"
#include "origami/io/generation_config.h"
#include "origami/io/hf_weights.h"
#include "origami/io/safetensors.h"
#include "origami/io/text_file.h"
#include "origami/model/weights.h"
#include "origami/tokenizer/tokenizer.h"

namespace origami {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The config.json fields that parse_model_config may refuse one by one (config.cpp).
constexpr const char* kRefusable[] = {"rope_scaling",   "head_dim",         "attention_bias",
                                      "mlp_bias",       "hidden_act",       "tie_word_embeddings",
                                      "pretraining_tp", "attention_dropout"};

// Every refusal of config.json: the shape alone, then each refusable field alone on top of
// it, so that one refused field does not hide the next. The configuration without the
// refused fields is returned (for the layout shown).
std::optional<ModelConfig> read_config(const std::string& path, ModelFolderReport& r) {
  json root;
  try {
    root = json::parse(io::read_text_file(path, io::kConfigFileLimit, "config"));
  } catch (const json::exception& e) {
    r.refusals.push_back(fmt::format("{}: not valid JSON ({})", path, e.what()));
    return std::nullopt;
  } catch (const ConfigError& e) {
    r.refusals.push_back(e.what());
    return std::nullopt;
  }
  if (!root.is_object()) {
    r.refusals.push_back(fmt::format("{}: the top level is not a JSON object", path));
    return std::nullopt;
  }
  json shape = root;
  for (const char* k : kRefusable) shape.erase(k);
  try {
    parse_model_config(shape.dump(), nullptr);
  } catch (const ConfigError& e) {
    r.refusals.push_back(fmt::format("{}: {}", path, e.what()));
    return std::nullopt;
  }
  json accepted = shape;
  for (const char* k : kRefusable) {
    if (!root.contains(k)) continue;
    json one = shape;
    one[k] = root.at(k);
    try {
      parse_model_config(one.dump(), nullptr);
      accepted[k] = root.at(k);
    } catch (const ConfigError& e) {
      r.refusals.push_back(fmt::format("{}: {}", path, e.what()));
    }
  }
  try {
    return parse_model_config(accepted.dump(), nullptr);
  } catch (const ConfigError& e) {  // two fields accepted alone, refused together
    r.refusals.push_back(fmt::format("{}: {}", path, e.what()));
    return std::nullopt;
  }
}

// The weight files against the tensors the configuration needs: names, shapes, dtypes.
void read_weights(const std::string& dir, ModelFolderReport& r) {
  io::HfWeights weights;
  try {
    weights = io::read_hf_weights(dir);
  } catch (const Error& e) {
    r.refusals.push_back(e.what());
    return;
  }
  r.indexed = weights.indexed;
  r.shards = weights.files;
  std::map<std::string, io::SafetensorsEntry> stored;
  for (const std::string& file : weights.files) {
    try {
      const io::SafetensorsFile f = io::SafetensorsFile::open(dir + "/" + file);
      for (const io::SafetensorsEntry& e : f.tensors()) {
        stored[e.name] = e;
        r.stored_parameters += e.numel;
        ++r.dtype_tensors[std::string(dtype_name(e.dtype))];
      }
    } catch (const Error& e) {
      r.refusals.push_back(e.what());
    }
  }
  if (!r.config) return;
  // The model's tensors, names and shapes, on a tracker that backs none but the smallest.
  MemoryTracker shapes_only("model folder");
  shapes_only.set_backs_memory(false);
  ModelTensors model = allocate_model_tensors(*r.config, shapes_only, MemCategory::Parameters);
  std::set<std::string> needed;
  std::vector<std::string> missing;
  for (const NamedTensor& s : named_tensors(model)) {
    needed.insert(s.name);
    const auto it = stored.find(s.name);
    if (it == stored.end()) {
      missing.push_back(s.name);
      continue;
    }
    const io::SafetensorsEntry& e = it->second;
    if (e.shape != s.tensor->shape())
      r.refusals.push_back(fmt::format("{}: tensor {} has shape {}, the configuration needs {}",
                                       dir, s.name, shape_str(e.shape),
                                       shape_str(s.tensor->shape())));
    if (e.dtype != DType::F32 && e.dtype != DType::BF16 && e.dtype != DType::F16)
      r.refusals.push_back(
          fmt::format("{}: tensor {} is {}; parameters load from F32, BF16 or "
                      "F16",
                      dir, s.name, dtype_name(e.dtype)));
  }
  if (!missing.empty())
    r.refusals.push_back(fmt::format("{}: {} tensor(s) the model needs are missing, e.g. {}{}", dir,
                                     missing.size(), missing.front(),
                                     missing.front() == "lm_head.weight"
                                         ? " (a tied LM head: set tie_word_embeddings true)"
                                         : ""));
  if (r.config->tie_word_embeddings && stored.count("lm_head.weight")) {
    try {
      const std::string mismatch = io::tied_head_mismatch(dir, weights);
      if (mismatch.empty())
        r.notes.push_back("lm_head.weight equals model.embed_tokens.weight (tied): read once");
      else
        r.refusals.push_back(mismatch);
    } catch (const Error& e) {
      r.refusals.push_back(e.what());
    }
    needed.insert("lm_head.weight");  // judged here, not as a tensor without a place
  }
  std::vector<std::string> extra;
  for (const auto& [name, e] : stored)
    if (!needed.count(name)) extra.push_back(name);
  if (!extra.empty())
    r.refusals.push_back(fmt::format(
        "{}: {} tensor(s) Origami's Llama has no place for, e.g. {}{}", dir, extra.size(),
        extra.front(),
        extra.front().ends_with(".bias") ? " (biases: attention_bias / mlp_bias)" : ""));
}

}  // namespace

ModelFolderReport inspect_model_folder(const std::string& dir) {
  ModelFolderReport r;
  r.dir = dir;
  if (!fs::is_directory(dir)) {
    r.refusals.push_back(fmt::format("{}: not a folder", dir));
    return r;
  }
  const std::string config = dir + "/config.json";
  if (fs::is_regular_file(config))
    r.config = read_config(config, r);
  else
    r.refusals.push_back(fmt::format("{}: missing (the model's shape)", config));
  read_weights(dir, r);

  if (fs::is_regular_file(fs::path(dir) / "tokenizer.json") ||
      fs::is_regular_file(fs::path(dir) / "tokenizer.model")) {
    try {
      const auto t = tokenizer::load(dir);
      r.tokenizer_kind = t->kind();
      r.tokenizer_vocab = t->vocab_size();
      if (r.config && t->vocab_size() > r.config->vocab_size)
        r.refusals.push_back(fmt::format("{}: the tokenizer has {} tokens, more than vocab_size {}",
                                         dir, t->vocab_size(), r.config->vocab_size));
    } catch (const Error& e) {
      r.refusals.push_back(e.what());
    }
  }
  const std::string gen = dir + "/generation_config.json";
  if (fs::is_regular_file(gen) && r.config) {
    try {
      r.eos = io::read_eos_token_ids(gen, r.config->vocab_size);
    } catch (const Error& e) {
      r.refusals.push_back(e.what());
    }
  }
  return r;
}

}  // namespace origami
