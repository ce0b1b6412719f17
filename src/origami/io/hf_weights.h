// The weights of a Hugging Face model folder: one model.safetensors, or shards listed by
// model.safetensors.index.json, whose "weight_map" names for every tensor the file holding it
//   {"metadata": {"total_size": ...}, "weight_map": {"lm_head.weight": "model-00002-of-00002
//    .safetensors", ...}}
// The index is checked against the shards before anything is read: every file a plain name
// inside the folder, present and a valid safetensors file, every mapped tensor in its file,
// every tensor of a shard mapped to that shard, no name twice. Each refusal is a ConfigError
// naming the index file, the tensor and the shard.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace origami::io {

inline constexpr const char* kHfWeightsFile = "model.safetensors";
inline constexpr const char* kHfWeightsIndex = "model.safetensors.index.json";

struct HfWeights {
  bool indexed = false;                        // from model.safetensors.index.json
  std::vector<std::string> files;              // the shard file names, sorted
  std::map<std::string, std::string> file_of;  // tensor name -> its file name
};

// True when `dir` holds model.safetensors or model.safetensors.index.json.
bool has_hf_weights(const std::string& dir);

// The folder's weight files, checked as above (the index wins when both exist, as in
// transformers). ConfigError when neither exists.
HfWeights read_hf_weights(const std::string& dir);

// For a folder whose config.json ties the embeddings: "" when it stores no lm_head.weight, or
// one identical to model.embed_tokens.weight (same dtype, shape and bytes: some exporters save
// the shared table twice); otherwise why it is refused (ConfigError text naming the folder and
// both tensors). Compares in place (the files are mapped): nothing is allocated.
std::string tied_head_mismatch(const std::string& dir, const HfWeights& weights);

}  // namespace origami::io
