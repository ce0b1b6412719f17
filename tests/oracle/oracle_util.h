// Helpers for tests that compare Origami with the PyTorch oracle (llama_oracle.py, run by
// Debian's /usr/bin/python3): writing its inputs, running it, and comparing tensors.
//
// Typical use (see oracle_selftest_test.cpp):
//   ASSERT_NO_FATAL_FAILURE(origami::oracle::require_torch());
//   write_config(dir + "/config.json", cfg);  write weights with SafetensorsWriter under
//   hf_parameter_shapes(cfg) names;  write_batch(dir + "/batch.safetensors", ...);
//   ASSERT_NO_FATAL_FAILURE(run_oracle({.config = ..., .weights = ..., .batches = {...},
//                                       .out = ...}));
//   auto out = io::SafetensorsFile::open(out_path);
//   EXPECT_LE(relative_error(my_grad, out.read_as_f64(name)), 1e-5) << name;
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "origami/core/tensor.h"
#include "origami/io/safetensors.h"
#include "origami/model/config.h"

namespace origami::oracle {

inline constexpr const char* kPython = "/usr/bin/python3";

inline std::string script_path() {
  return std::string(ORIGAMI_SOURCE_DIR) + "/tests/oracle/llama_oracle.py";
}

// Single-quoted for /bin/sh.
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command with stdout and stderr captured; returns the exit code (-1 if it did
// not exit normally).
inline int run_captured(const std::string& command, std::string* output) {
  static int counter = 0;
  const std::string log =
      fmt::format("{}origami_oracle_{}_{}.log", ::testing::TempDir(), ::getpid(), counter++);
  const int status = std::system((command + " > " + shell_quote(log) + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  if (output != nullptr) *output = text.str();
  std::remove(log.c_str());
  return (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
}

// A fatal test failure, with what to install, when python3 or torch is missing.
// Use as ASSERT_NO_FATAL_FAILURE(require_torch()).
inline void require_torch() {
  std::string output;
  if (run_captured(fmt::format("test -x {} && {} -c 'import torch'", kPython, kPython), &output) !=
      0)
    GTEST_FAIL() << "the PyTorch oracle needs " << kPython
                 << " with torch (Debian: apt-get install python3-torch); it said:\n"
                 << output;
}

struct OracleRun {
  std::string config;                // config.json
  std::string weights;               // model.safetensors, Hugging Face names
  std::vector<std::string> batches;  // batch.safetensors files (step k uses k mod count)
  std::string out;                   // out.safetensors
  int steps = 0;                     // AdamW steps (0: loss and gradients only)
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  double max_grad_norm = 0.0;  // > 0: clip_grad_norm_ before each step
  double moe_capacity_factor = 0.0;  // > 0: the mixture of experts' capacity (0: dropless)
};

inline std::string oracle_command(const OracleRun& r) {
  std::string cmd =
      fmt::format("{} {} --config {} --weights {} --out {}", kPython, shell_quote(script_path()),
                  shell_quote(r.config), shell_quote(r.weights), shell_quote(r.out));
  for (const auto& b : r.batches) cmd += " --batch " + shell_quote(b);
  if (r.moe_capacity_factor > 0)
    cmd += fmt::format(" --moe-capacity-factor {}", r.moe_capacity_factor);
  if (r.steps > 0)
    cmd += fmt::format(
        " --steps {} --lr {} --beta1 {} --beta2 {} --eps {} --weight-decay {} "
        "--max-grad-norm {}",
        r.steps, r.lr, r.beta1, r.beta2, r.eps, r.weight_decay, r.max_grad_norm);
  return cmd;
}

// Runs the oracle and returns its exit code (0 ok, 2 bad input); for error-path tests.
inline int run_oracle_status(const OracleRun& r, std::string* output) {
  return run_captured(oracle_command(r), output);
}

// Runs the oracle; a fatal failure with its output if it fails, naming what to install when
// python3 or torch is missing. The torch check runs only after a failure: importing torch takes
// a second or more of CPU, and the suite runs some seventy oracle tests.
// Use as ASSERT_NO_FATAL_FAILURE(run_oracle(r)).
inline void run_oracle(const OracleRun& r) {
  std::string output;
  const int code = run_oracle_status(r, &output);
  if (code == 0) return;
  ASSERT_NO_FATAL_FAILURE(require_torch());
  GTEST_FAIL() << "the oracle exited with " << code << ":\n"
               << oracle_command(r) << "\n"
               << output;
}

// Per-tensor relative error ||a - b|| / ||b|| (Euclidean norms, in double). When ||b|| is 0
// it returns ||a|| (an absolute error: a zero reference must be matched by zeros). Sizes
// must match (a mismatch returns +inf, which fails any tolerance).
inline double relative_error(std::span<const double> a, std::span<const double> b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, ref = 0, norm_a = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    ref += b[i] * b[i];
    norm_a += a[i] * a[i];
  }
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(norm_a);
}

// A tensor's elements as double (F32 or F64).
inline std::vector<double> to_f64(const Tensor& t) {
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  if (t.dtype() == DType::F64) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = t.data<double>()[i];
  } else {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = t.data<float>()[i];
  }
  return out;
}

// ||a - b|| / ||b|| for an Origami tensor against a reference from the oracle's output.
inline double relative_error(const Tensor& a, const std::vector<double>& b) {
  const std::vector<double> av = to_f64(a);
  return relative_error(std::span<const double>(av), std::span<const double>(b));
}

// The parameters of a Llama model in Hugging Face order, names and shapes ([out, in]).
inline std::vector<std::pair<std::string, Shape>> hf_parameter_shapes(const ModelConfig& c) {
  const std::int64_t V = c.vocab_size, h = c.hidden_size, f = c.intermediate_size, kv = c.kv_dim();
  const std::int64_t q = c.q_dim();  // heads x head_dim: h unless head_dim is explicit
  std::vector<std::pair<std::string, Shape>> out = {{"model.embed_tokens.weight", {V, h}}};
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    out.push_back({p + "input_layernorm.weight", {h}});
    out.push_back({p + "self_attn.q_proj.weight", {q, h}});
    out.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    out.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    out.push_back({p + "self_attn.o_proj.weight", {h, q}});
    out.push_back({p + "post_attention_layernorm.weight", {h}});
    if (c.is_moe()) {  // Mixtral's names (weights.h)
      out.push_back({p + "block_sparse_moe.gate.weight", {c.num_local_experts, h}});
      for (std::int64_t e = 0; e < c.num_local_experts; ++e) {
        const std::string q = fmt::format("{}block_sparse_moe.experts.{}.", p, e);
        out.push_back({q + "w1.weight", {f, h}});
        out.push_back({q + "w3.weight", {f, h}});
        out.push_back({q + "w2.weight", {h, f}});
      }
      continue;
    }
    out.push_back({p + "mlp.gate_proj.weight", {f, h}});
    out.push_back({p + "mlp.up_proj.weight", {f, h}});
    out.push_back({p + "mlp.down_proj.weight", {h, f}});
  }
  out.push_back({"model.norm.weight", {h}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {V, h}});  // tied: embed_tokens
  return out;
}

inline void write_config(const std::string& path, const ModelConfig& c) {
  std::ofstream out(path);
  out << model_config_to_json(c);
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// batch.safetensors: input_ids and labels, I32 [B, S] (label -100 = ignored).
inline void write_batch(const std::string& path, std::int64_t B, std::int64_t S,
                        const std::int32_t* input_ids, const std::int32_t* labels) {
  io::SafetensorsWriter w;
  w.add("input_ids", DType::I32, {B, S}, input_ids);
  w.add("labels", DType::I32, {B, S}, labels);
  w.write(path);
}

}  // namespace origami::oracle
