#include "origami/io/hf_weights.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "origami/core/error.h"
#include "origami/io/safetensors.h"
#include "origami/io/text_file.h"
#include "origami/io/strict_json.h"

namespace origami::io {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A name for a message: tensor names in a hostile index can be megabytes long.
std::string cut(const std::string& s) {
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// The weight_map, with a name given twice refused (nlohmann would keep the last silently).
json parse_index(const std::string& path) {
  const std::string text = read_text_file(path, kIndexFileLimit, "weights index");
  json root;
  try {
    root = parse_json_refusing_duplicates(text, [&](const std::string& key) {
      throw ConfigError(fmt::format("{}: {} is listed twice; keep one", path, cut(key)));
    });
  } catch (const json::exception& e) {
    throw ConfigError(
        fmt::format("{}: not valid JSON ({}); fix the file's syntax", path, e.what()));
  }
  if (!root.is_object() || !root.contains("weight_map") || !root.at("weight_map").is_object())
    throw ConfigError(
        fmt::format("{}: needs an object \"weight_map\" of tensor name -> "
                    "safetensors file name",
                    path));
  return root.at("weight_map");
}

}  // namespace

bool has_hf_weights(const std::string& dir) {
  return fs::is_regular_file(fs::path(dir) / kHfWeightsIndex) ||
         fs::is_regular_file(fs::path(dir) / kHfWeightsFile);
}

HfWeights read_hf_weights(const std::string& dir) {
  HfWeights w;
  const std::string index = (fs::path(dir) / kHfWeightsIndex).string();
  if (!fs::is_regular_file(index)) {
    const std::string single = (fs::path(dir) / kHfWeightsFile).string();
    if (!fs::is_regular_file(single))
      throw ConfigError(fmt::format("{}: no {} and no {}: not a Hugging Face model folder", dir,
                                    kHfWeightsFile, kHfWeightsIndex));
    w.files = {kHfWeightsFile};
    const SafetensorsFile file = SafetensorsFile::open(single);
    for (const SafetensorsEntry& e : file.tensors()) w.file_of[e.name] = kHfWeightsFile;
    return w;
  }
  w.indexed = true;
  const json map = parse_index(index);
  std::set<std::string> files;
  for (const auto& [name, file] : map.items()) {
    if (!file.is_string())
      throw ConfigError(fmt::format("{}: tensor {} maps to {}, not a file name", index, cut(name),
                                    cut(file.dump())));
    const std::string f = file.get<std::string>();
    // A shard is a file inside the folder: "../x" or "/etc/x" would read outside it.
    if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos ||
        f.find('\0') != std::string::npos)
      throw ConfigError(
          fmt::format("{}: tensor {} maps to '{}', not a file name inside the "
                      "folder",
                      index, cut(name), cut(f)));
    w.file_of[name] = f;
    files.insert(f);
  }
  if (w.file_of.empty()) throw ConfigError(fmt::format("{}: the weight_map is empty", index));
  w.files.assign(files.begin(), files.end());
  for (const std::string& f : w.files) {
    const std::string path = (fs::path(dir) / f).string();
    if (!fs::is_regular_file(path)) {
      const auto it = std::find_if(w.file_of.begin(), w.file_of.end(),
                                   [&](const auto& kv) { return kv.second == f; });
      throw ConfigError(fmt::format("{}: tensor {} is in shard {}, which is missing", index,
                                    cut(it->first), path));
    }
    const SafetensorsFile shard = SafetensorsFile::open(path);
    for (const SafetensorsEntry& e : shard.tensors()) {
      const auto it = w.file_of.find(e.name);
      if (it == w.file_of.end())
        throw ConfigError(
            fmt::format("{}: tensor {} of shard {} is not in the weight_map; add "
                        "it or remove it from the shard",
                        index, cut(e.name), f));
      if (it->second != f)
        throw ConfigError(
            fmt::format("{}: tensor {} is mapped to {} but is stored in shard {} "
                        "(in two shards, or the map is wrong)",
                        index, cut(e.name), it->second, f));
    }
    for (const auto& [name, file] : w.file_of)
      if (file == f && !shard.contains(name))
        throw ConfigError(
            fmt::format("{}: tensor {} is mapped to shard {}, which does not hold "
                        "it",
                        index, cut(name), f));
  }
  return w;
}

std::string tied_head_mismatch(const std::string& dir, const HfWeights& w) {
  const auto head = w.file_of.find("lm_head.weight");
  if (head == w.file_of.end()) return "";
  const auto embed = w.file_of.find("model.embed_tokens.weight");
  const auto why = [&](const std::string& detail) {
    return fmt::format(
        "{}: config.json has tie_word_embeddings true but the folder also stores an "
        "lm_head.weight that differs from model.embed_tokens.weight{}; a tied model has one "
        "table: remove lm_head.weight, or set tie_word_embeddings to false to load the head "
        "as its own matrix",
        dir, detail);
  };
  if (embed == w.file_of.end()) return why(" (which is missing)");
  const SafetensorsFile hf = SafetensorsFile::open((fs::path(dir) / head->second).string());
  const SafetensorsFile ef = SafetensorsFile::open((fs::path(dir) / embed->second).string());
  const SafetensorsEntry &h = hf.entry(head->first), &e = ef.entry(embed->first);
  if (h.dtype != e.dtype || h.shape != e.shape)
    return why(fmt::format(" (stored as {} {}, the embedding as {} {})", dtype_name(h.dtype),
                           shape_str(h.shape), dtype_name(e.dtype), shape_str(e.shape)));
  const std::span<const std::byte> a = hf.bytes(head->first), b = ef.bytes(embed->first);
  const auto diff = std::mismatch(a.begin(), a.end(), b.begin());
  if (diff.first == a.end()) return "";
  const std::size_t element = static_cast<std::size_t>(diff.first - a.begin()) /
                              dtype_size(h.dtype);
  return why(fmt::format(" (first at element {})", element));
}

}  // namespace origami::io
