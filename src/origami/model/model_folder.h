// What a Hugging Face model folder holds and whether Origami can import it: the facts
// `origami inspect --model-dir` prints (parameter count, layout, dtypes, shards, tokenizer,
// rope scaling, eos ids) and every reason it would be refused, all of them at once (the
// loaders stop at the first).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "origami/model/config.h"

namespace origami {

struct ModelFolderReport {
  std::string dir;
  std::optional<ModelConfig> config;   // as read, with refused fields left out
  std::int64_t stored_parameters = 0;  // elements of every tensor in the weight files
  std::map<std::string, std::int64_t> dtype_tensors;  // dtype name -> tensor count
  std::vector<std::string> shards;                    // weight file names
  bool indexed = false;        // shards listed by model.safetensors.index.json
  std::string tokenizer_kind;  // "" when the folder has no tokenizer
  std::int64_t tokenizer_vocab = 0;
  std::vector<std::int32_t> eos;      // generation_config.json's eos ids
  std::vector<std::string> refusals;  // each: "file: what and why"
  std::vector<std::string> notes;     // importable, with a remark (tied lm_head read once)

  bool importable() const { return refusals.empty(); }
};

// Never throws for a bad folder: every problem becomes a refusal.
ModelFolderReport inspect_model_folder(const std::string& dir);

}  // namespace origami
