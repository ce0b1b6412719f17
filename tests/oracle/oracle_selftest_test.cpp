// Tests of the PyTorch oracle itself, before any Origami model exists: its self-test, a
// model whose blocks contribute nothing (zero o_proj and down_proj) so that its loss and
// head gradients have a closed form computed here in double, one AdamW step against its
// closed form, and its refusal of bad input.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "oracle_util.h"

namespace origami::oracle {
namespace {

using ::testing::HasSubstr;

std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(Oracle, SelfTestPasses) {
  ASSERT_NO_FATAL_FAILURE(require_torch());
  std::string output;
  EXPECT_EQ(
      run_captured(fmt::format("{} {} --self-test", kPython, shell_quote(script_path())), &output),
      0)
      << output;
  EXPECT_THAT(output, HasSubstr("self-test passed"));
  EXPECT_THAT(output, HasSubstr("gradcheck of every parameter"));
}

// A grouped-query model whose attention and MLP outputs are zero, so the hidden state is the
// embedding row: loss = mean CE of lm_head @ rmsnorm(embed[id]) * w over unmasked tokens.
class OracleClosedForm : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_.vocab_size = 13;
    cfg_.hidden_size = 8;
    cfg_.intermediate_size = 12;
    cfg_.num_hidden_layers = 1;
    cfg_.num_attention_heads = 2;
    cfg_.num_key_value_heads = 1;
    cfg_.rms_norm_eps = 1e-5;
    dir_ = fresh_dir(fmt::format("origami_oracle_{}", ::getpid()));
    std::mt19937 gen(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    io::SafetensorsWriter w;
    for (const auto& [name, shape] : hf_parameter_shapes(cfg_)) {
      std::vector<float>& v = params_[name];
      v.resize(static_cast<std::size_t>(shape_numel(shape)));
      const bool zero =
          name.find("o_proj") != std::string::npos || name.find("down_proj") != std::string::npos;
      for (auto& x : v)
        x = zero ? 0.0f : (shape.size() == 1 ? 1.0f + 0.2f * normal(gen) : normal(gen));
      w.add(name, DType::F32, shape, v.data());
    }
    w.write(dir_ + "/model.safetensors");
    ASSERT_NO_FATAL_FAILURE(write_config(dir_ + "/config.json", cfg_));
    ids_ = {3, 0, 12, 7, 7, 1, 9, 4, 2, 11};
    labels_ = {0, 12, -100, 7, 1, 9, 4, -100, 11, 5};
    write_batch(dir_ + "/batch.safetensors", 2, 5, ids_.data(), labels_.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  OracleRun base_run() const {
    return {.config = dir_ + "/config.json",
            .weights = dir_ + "/model.safetensors",
            .batches = {dir_ + "/batch.safetensors"},
            .out = dir_ + "/out.safetensors"};
  }

  ModelConfig cfg_;
  std::string dir_;
  std::map<std::string, std::vector<float>> params_;
  std::vector<std::int32_t> ids_, labels_;
};

TEST_F(OracleClosedForm, LossAndHeadGradientsMatchTheClosedForm) {
  ASSERT_NO_FATAL_FAILURE(run_oracle(base_run()));
  const auto out = io::SafetensorsFile::open(dir_ + "/out.safetensors");

  const std::int64_t V = cfg_.vocab_size, h = cfg_.hidden_size;
  const auto& E = params_["model.embed_tokens.weight"];
  const auto& W = params_["lm_head.weight"];
  const auto& g = params_["model.norm.weight"];
  int count = 0;
  for (int l : labels_) count += l != -100;
  double loss = 0;
  std::vector<double> dW(static_cast<std::size_t>(V * h), 0.0),
      dg(static_cast<std::size_t>(h), 0.0);
  for (std::size_t t = 0; t < ids_.size(); ++t) {
    if (labels_[t] == -100) continue;
    const float* e = &E[static_cast<std::size_t>(ids_[t] * h)];
    double ms = 0;
    for (std::int64_t i = 0; i < h; ++i) ms += double(e[i]) * e[i];
    const double inv = 1.0 / std::sqrt(ms / static_cast<double>(h) + cfg_.rms_norm_eps);
    std::vector<double> xhat(static_cast<std::size_t>(h)), n(static_cast<std::size_t>(h));
    for (std::int64_t i = 0; i < h; ++i) {
      xhat[i] = e[i] * inv;
      n[i] = xhat[i] * g[i];
    }
    std::vector<double> logit(static_cast<std::size_t>(V), 0.0);
    double mx = -INFINITY;
    for (std::int64_t v = 0; v < V; ++v) {
      for (std::int64_t i = 0; i < h; ++i) logit[v] += double(W[v * h + i]) * n[i];
      mx = std::max(mx, logit[v]);
    }
    double z = 0;
    for (double l : logit) z += std::exp(l - mx);
    loss += (mx + std::log(z) - logit[labels_[t]]) / count;
    for (std::int64_t v = 0; v < V; ++v) {
      const double d = (std::exp(logit[v] - mx) / z - (v == labels_[t])) / count;
      for (std::int64_t i = 0; i < h; ++i) {
        dW[v * h + i] += d * n[i];
        dg[i] += d * W[v * h + i] * xhat[i];
      }
    }
  }
  const auto oracle_loss = out.read_as_f64("loss");
  ASSERT_EQ(oracle_loss.size(), 1u);
  EXPECT_NEAR(oracle_loss[0], loss, 1e-12 * loss);
  EXPECT_LE(relative_error(std::span<const double>(out.read_as_f64("lm_head.weight")),
                           std::span<const double>(dW)),
            1e-12);
  EXPECT_LE(relative_error(std::span<const double>(out.read_as_f64("model.norm.weight")),
                           std::span<const double>(dg)),
            1e-12);
  // Every parameter has an F64 gradient of its own shape.
  for (const auto& [name, shape] : hf_parameter_shapes(cfg_)) {
    ASSERT_TRUE(out.contains(name)) << name;
    EXPECT_EQ(out.entry(name).dtype, DType::F64) << name;
    EXPECT_EQ(out.entry(name).shape, shape) << name;
  }
}

TEST_F(OracleClosedForm, OneAdamWStepMatchesTheClosedForm) {
  // First step: m_hat = g, v_hat = g^2, so p <- p (1 - lr wd [2-D only]) - lr g / (|g| + eps).
  OracleRun run = base_run();
  run.steps = 1;
  run.lr = 0.01;
  run.weight_decay = 0.1;
  run.eps = 1e-3;  // large enough to matter in the closed form
  ASSERT_NO_FATAL_FAILURE(run_oracle(run));
  const auto out = io::SafetensorsFile::open(run.out);
  EXPECT_EQ(out.read_as_f64("losses"), out.read_as_f64("loss"));
  for (const auto& [name, shape] : hf_parameter_shapes(cfg_)) {
    const auto grad = out.read_as_f64(name);
    const auto& p0 = params_[name];
    const double decay = shape.size() == 2 ? run.lr * run.weight_decay : 0.0;
    std::vector<double> want(p0.size());
    for (std::size_t i = 0; i < p0.size(); ++i)
      want[i] = p0[i] * (1 - decay) - run.lr * grad[i] / (std::abs(grad[i]) + run.eps);
    EXPECT_LE(relative_error(std::span<const double>(out.read_as_f64("param." + name)),
                             std::span<const double>(want)),
              1e-12)
        << name;
  }
}

TEST_F(OracleClosedForm, SeveralBatchesAndStepsGiveOneLossPerStep) {
  std::vector<std::int32_t> masked(labels_.size(), -100);
  write_batch(dir_ + "/masked.safetensors", 2, 5, ids_.data(), masked.data());
  OracleRun run = base_run();
  run.batches.push_back(dir_ + "/masked.safetensors");
  run.steps = 3;
  run.max_grad_norm = 0.5;
  ASSERT_NO_FATAL_FAILURE(run_oracle(run));
  const auto out = io::SafetensorsFile::open(run.out);
  const auto losses = out.read_as_f64("losses");
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_EQ(losses[0], out.read_as_f64("loss")[0]);
  EXPECT_EQ(losses[1], 0.0);  // step 1 uses the all-masked batch: exactly 0, not NaN
  EXPECT_TRUE(std::isfinite(losses[2]));
  EXPECT_NE(losses[2], losses[0]);  // the parameters moved
}

TEST_F(OracleClosedForm, RefusesBadInputWithExitCode2) {
  std::string output;
  // A truncated weights file.
  {
    const std::string path = dir_ + "/model.safetensors";
    const auto size = std::filesystem::file_size(path);
    std::filesystem::resize_file(path, size - 3);
  }
  ASSERT_NO_FATAL_FAILURE(require_torch());
  EXPECT_EQ(run_oracle_status(base_run(), &output), 2) << output;
  EXPECT_THAT(output, HasSubstr("model.safetensors"));
  // Weights without lm_head.
  io::SafetensorsWriter w;
  for (const auto& [name, shape] : hf_parameter_shapes(cfg_))
    if (name != "lm_head.weight") w.add(name, DType::F32, shape, params_[name].data());
  w.write(dir_ + "/model.safetensors");
  EXPECT_EQ(run_oracle_status(base_run(), &output), 2) << output;
  EXPECT_THAT(output, HasSubstr("lm_head.weight"));
  // A label outside the vocabulary (with complete weights again).
  io::SafetensorsWriter full;
  for (const auto& [name, shape] : hf_parameter_shapes(cfg_))
    full.add(name, DType::F32, shape, params_[name].data());
  full.write(dir_ + "/model.safetensors");
  ASSERT_EQ(run_oracle_status(base_run(), &output), 0) << output;
  labels_[0] = 13;
  write_batch(dir_ + "/batch.safetensors", 2, 5, ids_.data(), labels_.data());
  EXPECT_EQ(run_oracle_status(base_run(), &output), 2) << output;
  EXPECT_THAT(output, HasSubstr("labels outside"));
}

}  // namespace
}  // namespace origami::oracle
