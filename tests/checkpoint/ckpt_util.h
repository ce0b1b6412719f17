// Shared pieces of the checkpoint tests: a tiny model, quiet in-process runs, and comparing
// two checkpoints' tensors bit for bit.
#pragma once

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "origami/checkpoint/checkpoint.h"
#include "origami/io/safetensors.h"
#include "origami/train/trainer.h"

namespace origami::ckpt_test {

// Heads 4, kv heads 2, MLP 48, vocabulary 256 (the byte tokenizer): tp 2 divides everything,
// and the vocabulary padding path is taken by odd degrees.
inline ModelConfig tiny_model() {
  ModelConfig c;
  c.vocab_size = 256;
  // 12 heads, f 48 and S 24 split over every degree the tests use (2, 3, 4; zigzag 2D | S).
  c.hidden_size = 48;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 12;
  c.num_key_value_heads = 12;
  c.max_position_embeddings = 64;
  return c;
}

// A layout as (strategy, degree, mesh).
struct Layout {
  std::string strategy;
  int degree = 1;
  std::string mesh;
  std::string precision = "fp32";  // --precision
  std::string name() const {
    return (mesh.empty() ? strategy + std::to_string(degree) : mesh) +
           (precision == "fp32" ? "" : "_" + precision);
  }
};

inline TrainOptions tiny_options(const Layout& l, std::int64_t steps) {
  TrainOptions o;
  o.model = tiny_model();
  o.seq = 24;
  o.batch = 4;
  o.grad_accum = 2;
  o.steps = steps;
  o.warmup = 2;
  o.lr = 1e-2f;
  o.threads = 1;
  o.peak_gflops = 1;
  o.log_every = 1000;
  o.strategy = l.strategy;
  o.degree = l.degree;
  o.mesh = l.mesh;
  o.precision = l.precision;
  return o;
}

inline TrainResult quiet_train(const TrainOptions& o, std::vector<std::string>* lines = nullptr) {
  return train(o, [lines](const std::string& s) {
    if (lines) lines->push_back(s);
  });
}

// Whether any logged line contains text.
inline bool said(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& s : lines)
    if (s.find(text) != std::string::npos) return true;
  return false;
}

// A fresh folder per call, removed by the caller's TearDown or left in TempDir.
inline std::string fresh_dir(const std::string& tag) {
  static int counter = 0;
  const std::string d = ::testing::TempDir() + "ckpt_" + std::to_string(::getpid()) + "_" + tag +
                        "_" + std::to_string(counter++);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Every tensor of checkpoint `a` has the same bytes in `b` (and the same set of tensors).
inline void expect_same_tensors(const std::string& a, const std::string& b) {
  const nlohmann::json ia = ckpt::read_index(a), ib = ckpt::read_index(b);
  ASSERT_EQ(ia.at("tensors").size(), ib.at("tensors").size());
  std::size_t compared = 0;
  for (const auto& [name, info] : ia.at("tensors").items()) {
    ASSERT_TRUE(ib.at("tensors").contains(name)) << name;
    const auto& ba = info.at("blocks");
    const auto& bb = ib.at("tensors").at(name).at("blocks");
    ASSERT_EQ(ba.size(), bb.size()) << name;
    for (std::size_t k = 0; k < ba.size(); ++k) {
      const auto fa = io::SafetensorsFile::open(a + "/" + ba[k].at("file").get<std::string>());
      const auto fb = io::SafetensorsFile::open(b + "/" + bb[k].at("file").get<std::string>());
      const auto x = fa.bytes(name), y = fb.bytes(name);
      ASSERT_EQ(x.size(), y.size()) << name;
      EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size()), 0) << name << " differs";
      ++compared;
    }
  }
  EXPECT_GT(compared, 0u);
}

}  // namespace origami::ckpt_test
