// Hugging Face weight folders: model.safetensors or shards with model.safetensors.index.json;
// every malformed index refused naming the index, the tensor and the shard.
#include "origami/io/hf_weights.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "origami/core/error.h"
#include "origami/io/safetensors.h"

namespace origami::io {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class HfWeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "origami_hf_weights_" + std::to_string(::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // Two shards: a and b in the first, c in the second.
    SafetensorsWriter one, two;
    one.add("a", DType::F32, {2}, values_);
    one.add("b", DType::BF16, {3}, halves_);
    two.add("c", DType::F16, {1, 2}, halves_);
    one.write(dir_ + "/model-00001-of-00002.safetensors");
    two.write(dir_ + "/model-00002-of-00002.safetensors");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_index(const std::string& text) { std::ofstream(dir_ + "/" + kHfWeightsIndex) << text; }
  static nlohmann::json good_map() {
    return {{"a", "model-00001-of-00002.safetensors"},
            {"b", "model-00001-of-00002.safetensors"},
            {"c", "model-00002-of-00002.safetensors"}};
  }
  void write_map(const nlohmann::json& map) {
    write_index(nlohmann::json{{"metadata", {{"total_size", 18}}}, {"weight_map", map}}.dump());
  }
  // Expects a ConfigError containing every part, and the index file's name.
  void expect_refused(const std::vector<std::string>& parts) {
    try {
      read_hf_weights(dir_);
      FAIL() << "accepted, expected: " << parts.at(0);
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr(kHfWeightsIndex));
      for (const std::string& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
    }
  }

  std::string dir_;
  const float values_[2] = {1.0f, -2.0f};
  const std::uint16_t halves_[3] = {0x3f80, 0xc000, 0x0001};
};

TEST_F(HfWeightsTest, ReadsAShardedIndexAndASingleFile) {
  EXPECT_FALSE(has_hf_weights(dir_));
  EXPECT_THROW(read_hf_weights(dir_), ConfigError);
  write_map(good_map());
  ASSERT_TRUE(has_hf_weights(dir_));
  const HfWeights w = read_hf_weights(dir_);
  EXPECT_TRUE(w.indexed);
  EXPECT_EQ(w.files, (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                               "model-00002-of-00002.safetensors"}));
  EXPECT_EQ(w.file_of.at("c"), "model-00002-of-00002.safetensors");
  EXPECT_EQ(w.file_of.size(), 3u);

  fs::remove(dir_ + "/" + kHfWeightsIndex);
  fs::rename(dir_ + "/model-00001-of-00002.safetensors", dir_ + "/" + kHfWeightsFile);
  const HfWeights single = read_hf_weights(dir_);
  EXPECT_FALSE(single.indexed);
  EXPECT_EQ(single.files, (std::vector<std::string>{kHfWeightsFile}));
  EXPECT_EQ(single.file_of.size(), 2u);
}

TEST_F(HfWeightsTest, RefusesMalformedIndexesNamingTheTensorAndTheShard) {
  nlohmann::json m = good_map();
  m["d"] = "model-00002-of-00002.safetensors";  // mapped, but not in the shard
  write_map(m);
  expect_refused({"tensor d", "model-00002-of-00002.safetensors", "does not hold"});

  m = good_map();
  m.erase("b");  // in a shard the map uses, not mapped (a shard no tensor maps to is not read)
  write_map(m);
  expect_refused({"tensor b", "model-00001-of-00002.safetensors", "not in the weight_map"});

  m = good_map();
  m["b"] = "model-00002-of-00002.safetensors";  // mapped to the wrong shard
  write_map(m);
  expect_refused({"tensor b", "mapped to model-00002"});

  m = good_map();
  m["c"] = "model-00003-of-00003.safetensors";
  write_map(m);
  expect_refused({"tensor c", "model-00003-of-00003.safetensors", "missing"});

  for (const char* escape : {"../model-00001-of-00002.safetensors", "/etc/passwd", ".."}) {
    m = good_map();
    m["a"] = escape;
    write_map(m);
    expect_refused({"tensor a", "not a file name inside the folder"});
  }
  m = good_map();
  m["a"] = 7;
  write_map(m);
  expect_refused({"tensor a", "not a file name"});

  write_map(nlohmann::json::object());
  expect_refused({"empty"});
  write_index(R"({"metadata": {}})");
  expect_refused({"weight_map"});
  write_index(R"({"weight_map": {"a": "model-00001-of-00002.safetensors",)");
  expect_refused({"not valid JSON"});
  write_index(R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                  "b": "model-00001-of-00002.safetensors", "a": "x.safetensors",
                  "c": "model-00002-of-00002.safetensors"}})");
  expect_refused({"a is listed twice"});

  // A corrupt shard is an error naming the shard.
  write_map(good_map());
  std::ofstream(dir_ + "/model-00002-of-00002.safetensors") << "not a safetensors file";
  try {
    read_hf_weights(dir_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("model-00002-of-00002.safetensors"));
  }
}

}  // namespace
}  // namespace origami::io
