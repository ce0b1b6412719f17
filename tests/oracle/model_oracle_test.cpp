// The single-device model against the independent PyTorch implementation (llama_oracle.py,
// float64): loss and every parameter gradient (per tensor ||a-b||/||b|| <= 1e-5), and the
// parameters after three AdamW steps with clipping and weight decay (per tensor <= 1e-4);
// plain, GQA, rope scaling, explicit head_dim and tied embeddings, mixture-of-experts MLPs
// (E 4 and 8, top-1 and top-2, dropless and with a capacity that drops; the router's
// gradient and the auxiliary loss included); and rows of packed documents (loss and
// gradients).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oracle_util.h"
#include "origami/data/dataset.h"
#include "origami/kernels/cross_entropy.h"
#include "origami/model/llama.h"
#include "origami/train/trainer.h"

namespace origami::oracle {
namespace {

struct Case {
  const char* name;
  ModelConfig config;
  std::int64_t batch, seq;
  // The AdamW test's learning rate. Its first steps move every element by about lr whatever
  // its gradient's size, so elements whose gradient nearly cancels (layer 0's k_proj: the
  // softmax is blind to a shift shared by all keys) carry fp32 rounding into the parameters
  // at a size that grows with lr: PyTorch itself, fp32 against fp64 on this recipe (lr 1e-2,
  // 30 random models, tied and untied), differs by up to 4e-4 per tensor. Where lr 1e-2 hit
  // that tail ("tied": 5e-4 in layer 0's k_proj, every other tensor <= 8e-6, the gradients
  // equal to 2e-6 at the same weights) the case steps at 1e-3, which still moves a tensor by
  // ~3 lr / 0.15 = 2e-2 >> 1e-4 if a gradient were wrong.
  float step_lr = 1e-2f;
};

ModelConfig make_config(std::int64_t vocab, std::int64_t h, std::int64_t f, std::int64_t layers,
                        std::int64_t heads, std::int64_t kv_heads) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = h;
  c.intermediate_size = f;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.max_position_embeddings = 512;
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-5;
  // Larger than the training default so that attention is far from uniform and every path
  // carries signal the comparison can see.
  c.initializer_range = 0.15;
  return c;
}

// Llama 3.1's rope_scaling numbers over an original context of 64 so that, at head size 16,
// the three wavelength bands (kept, interpolated, divided by the factor) all occur.
ModelConfig with_llama3_rope(ModelConfig c) {
  c.rope_scaling = {.type = RopeScaling::Type::Llama3,
                    .factor = 8.0,
                    .low_freq_factor = 1.0,
                    .high_freq_factor = 4.0,
                    .original_max_position_embeddings = 64};
  return c;
}
ModelConfig with_linear_rope(ModelConfig c) {
  c.rope_scaling = {.type = RopeScaling::Type::Linear, .factor = 4.0};
  return c;
}
// One table for the embedding and the LM head (no lm_head.weight on either side).
ModelConfig with_tied_embeddings(ModelConfig c) {
  c.tie_word_embeddings = true;
  return c;
}
// heads x head_dim (4 x 16 = 64) different from hidden (48): q_proj [64, 48], o_proj [48, 64].
ModelConfig with_head_dim(ModelConfig c, std::int64_t head_dim) {
  c.explicit_head_dim = head_dim;
  return c;
}
// Mixtral-style experts; a load-balancing coefficient far above the default 1e-3 so that
// its gradient is a visible part of the router's; capacity > 0 drops assignments.
ModelConfig with_experts(ModelConfig c, std::int64_t experts, std::int64_t top_k,
                         double capacity = 0) {
  c.num_local_experts = experts;
  c.num_experts_per_tok = top_k;
  c.router_aux_loss_coef = 0.3;
  c.moe_capacity_factor = capacity;
  return c;
}

class ModelOracle : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + fmt::format("origami_model_oracle_{}_{}", ::getpid(),
                                              GetParam().name);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Random ids and labels with about one label in seven masked.
  void make_batch(const Case& c) {
    std::mt19937 gen(11);
    std::uniform_int_distribution<int> tok(0, static_cast<int>(c.config.vocab_size) - 1);
    ids_.resize(static_cast<std::size_t>(c.batch * c.seq));
    labels_.resize(ids_.size());
    for (std::size_t i = 0; i < ids_.size(); ++i) {
      ids_[i] = tok(gen);
      labels_[i] = (gen() % 7 == 0) ? kernels::kIgnoreLabel : tok(gen);
    }
  }

  void write_model(LlamaModel& model) {
    io::SafetensorsWriter w;
    for (const NamedTensor& p : named_tensors(model.params())) w.add(p.name, *p.tensor);
    w.write(dir_ + "/model.safetensors");
    ASSERT_NO_FATAL_FAILURE(write_config(dir_ + "/config.json", model.config()));
    write_batch(dir_ + "/batch.safetensors", GetParam().batch, GetParam().seq, ids_.data(),
                labels_.data());
  }

  std::string dir_;
  std::vector<std::int32_t> ids_, labels_;
};

// Norm weights away from 1, so their gradients and their effect are both exercised.
void perturb_norms(LlamaModel& model) {
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  for (const NamedTensor& p : named_tensors(model.params()))
    if (p.is_norm)
      for (float& x : p.tensor->span()) x = 1.0f + normal(gen);
}

TEST_P(ModelOracle, LossAndEveryGradientMatchPyTorch) {
  const Case& c = GetParam();
  make_batch(c);
  MemoryTracker tracker;
  LlamaModel model(c.config, tracker, 77);
  perturb_norms(model);
  ASSERT_NO_FATAL_FAILURE(write_model(model));

  const TokenBatch batch{c.batch, c.seq, ids_.data(), labels_.data()};
  const std::int64_t unmasked = count_unmasked(batch);
  const LossResult loss = model.forward_backward(batch, 1.0 / static_cast<double>(unmasked));
  // A capacity case means to drop; a dense model has no auxiliary loss.
  EXPECT_EQ(loss.moe.dropped > 0, c.config.moe_capacity_factor > 0) << loss.moe.dropped;
  EXPECT_EQ(loss.aux > 0, c.config.is_moe()) << loss.aux;

  ASSERT_NO_FATAL_FAILURE(run_oracle({.config = dir_ + "/config.json",
                                      .weights = dir_ + "/model.safetensors",
                                      .batches = {dir_ + "/batch.safetensors"},
                                      .out = dir_ + "/out.safetensors",
                                      .moe_capacity_factor = c.config.moe_capacity_factor}));
  const auto out = io::SafetensorsFile::open(dir_ + "/out.safetensors");
  const double ref_loss = out.read_as_f64("loss").at(0);
  const double total = loss.mean() + loss.aux;
  EXPECT_LE(std::abs(total - ref_loss) / std::abs(ref_loss), 1e-5)
      << "loss " << total << " vs " << ref_loss;
  double worst = 0;
  for (const NamedTensor& g : named_tensors(model.grads())) {
    const double err = relative_error(*g.tensor, out.read_as_f64(g.name));
    EXPECT_LE(err, 1e-5) << g.name;
    worst = std::max(worst, err);
  }
  std::cout << "largest gradient error " << worst << ", loss " << total << "\n";
}

TEST_P(ModelOracle, ThreeAdamWStepsMatchPyTorch) {
  const Case& c = GetParam();
  make_batch(c);
  MemoryTracker tracker;
  LlamaModel model(c.config, tracker, 78);
  perturb_norms(model);
  ASSERT_NO_FATAL_FAILURE(write_model(model));

  const kernels::AdamWHyper hyper{.lr = c.step_lr, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                  .weight_decay = 0.1f};
  const double max_norm = 0.5;  // small enough that clipping is active
  AdamW optimizer(c.config, tracker, hyper);
  const std::vector<TokenBatch> micro{{c.batch, c.seq, ids_.data(), labels_.data()}};
  std::vector<double> losses;
  bool clipped = false;
  for (int step = 0; step < 3; ++step) {
    const StepStats s = train_step(model, optimizer, micro, hyper.lr, max_norm);
    losses.push_back(s.loss);
    clipped = clipped || s.clip_coefficient < 1.0f;
  }
  EXPECT_TRUE(clipped) << "the test means to exercise clipping";

  ASSERT_NO_FATAL_FAILURE(run_oracle({.config = dir_ + "/config.json",
                                      .weights = dir_ + "/model.safetensors",
                                      .batches = {dir_ + "/batch.safetensors"},
                                      .out = dir_ + "/out.safetensors",
                                      .steps = 3,
                                      .lr = hyper.lr,
                                      .beta1 = hyper.beta1,
                                      .beta2 = hyper.beta2,
                                      .eps = hyper.eps,
                                      .weight_decay = hyper.weight_decay,
                                      .max_grad_norm = max_norm,
                                      .moe_capacity_factor = c.config.moe_capacity_factor}));
  const auto out = io::SafetensorsFile::open(dir_ + "/out.safetensors");
  const std::vector<double> ref_losses = out.read_as_f64("losses");
  ASSERT_EQ(ref_losses.size(), 3u);
  for (int i = 0; i < 3; ++i)
    EXPECT_LE(std::abs(losses[i] - ref_losses[i]) / ref_losses[i], 1e-5) << "step " << i;
  double worst = 0;
  for (const NamedTensor& p : named_tensors(model.params())) {
    const double err = relative_error(*p.tensor, out.read_as_f64("param." + p.name));
    EXPECT_LE(err, 1e-4) << p.name;
    worst = std::max(worst, err);
  }
  std::cout << "largest parameter error after 3 steps " << worst << "\n";
}

INSTANTIATE_TEST_SUITE_P(
    Configs, ModelOracle,
    ::testing::Values(
        // Grouped-query attention (4 query heads share 2 kv heads), an odd vocabulary.
        Case{"gqa", make_config(97, 64, 160, 2, 4, 2), 2, 37},
        // B > 1 with multi-head attention.
        Case{"batch3", make_config(256, 48, 96, 2, 3, 3), 3, 16},
        // A sequence that is not a multiple of any attention tile, GQA 8 -> 2.
        Case{"long_odd", make_config(64, 64, 128, 1, 8, 2), 1, 203},
        // rope_scaling: llama3 (every band) and linear, in the oracle from transformers'
        // formulas.
        Case{"llama3_rope", with_llama3_rope(make_config(97, 64, 160, 2, 4, 2)), 2, 37},
        Case{"linear_rope", with_linear_rope(make_config(256, 48, 96, 2, 3, 3)), 3, 16},
        // An explicit head_dim with heads x head_dim != hidden.
        Case{"head_dim", with_head_dim(make_config(97, 48, 96, 2, 4, 2), 16), 2, 21},
        // Tied embeddings: the table's gradient is the lookup's scatter-add plus the head's dW
        // (the oracle: one leaf tensor used twice); with llama3 scaling as Llama 3.2 has both.
        Case{"tied", with_tied_embeddings(make_config(97, 64, 160, 2, 4, 2)), 2, 37, 1e-3f},
        Case{"tied_llama3",
             with_tied_embeddings(with_llama3_rope(make_config(256, 48, 96, 2, 3, 3))), 3, 16},
        // Mixture of experts: top-1 and top-2 over 4 and 8 experts, two with a capacity
        // factor that drops assignments (GQA, odd vocabularies and lengths).
        Case{"moe_e4_top1", with_experts(make_config(97, 32, 40, 2, 4, 2), 4, 1), 2, 19},
        Case{"moe_e4_top2_capacity", with_experts(make_config(97, 32, 40, 2, 4, 2), 4, 2, 1.0),
             2, 19},
        Case{"moe_e8_top1_capacity", with_experts(make_config(61, 32, 24, 2, 4, 2), 8, 1, 1.25),
             2, 23},
        Case{"moe_e8_top2", with_experts(make_config(61, 32, 24, 2, 4, 2), 8, 2), 2, 23}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// Packed documents: consecutive rows of S tokens cut from one stream of documents (lengths
// below: a one-token document first, documents shorter and longer than a row, several
// crossing a row's end), packed by Origami's own data path (data::cut_at_documents: document
// ids, positions restarting per document, the label of a document's last token ignored, as
// --document-masking trains). The oracle gets only the raw next-token labels and a flag at
// each document's last token, and derives documents, positions, the block-diagonal causal
// mask and the ignored labels itself (llama_oracle.py packed_documents).
struct PackedOracleCase {
  const char* name;
  ModelConfig config;
  std::int64_t batch, seq;
};

class ModelOraclePacked : public ::testing::TestWithParam<PackedOracleCase> {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + fmt::format("origami_packed_oracle_{}_{}", ::getpid(),
                                              GetParam().name);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_P(ModelOraclePacked, LossAndEveryGradientMatchPyTorch) {
  const PackedOracleCase& c = GetParam();
  const std::int64_t B = c.batch, S = c.seq, n = B * S;
  // The stream: documents of these lengths, repeated until it holds every row's S tokens and
  // the last row's next token.
  const std::int64_t lengths[] = {1, 4, 13, 1, 22, 2, 9, 30, 5};
  std::vector<std::int64_t> offsets{0};  // each document's first token
  for (std::size_t i = 0; offsets.back() <= n; ++i)
    offsets.push_back(offsets.back() + lengths[i % std::size(lengths)]);
  std::mt19937 gen(19);
  std::vector<std::int32_t> stream(static_cast<std::size_t>(n + 1));
  for (std::int32_t& t : stream)
    t = static_cast<std::int32_t>(gen() % static_cast<unsigned>(c.config.vocab_size));

  std::vector<std::int32_t> ids(static_cast<std::size_t>(n)), labels(ids.size()),
      raw_labels(ids.size()), documents(ids.size()), ends(ids.size(), 0);
  std::vector<std::int64_t> positions(ids.size());
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t start = b * S;
    for (std::int64_t s = 0; s < S; ++s) {
      const auto i = static_cast<std::size_t>(start + s);
      ids[i] = stream[i];
      // About one target in seven masked as well (the loss's own ignore label).
      raw_labels[i] = gen() % 7 == 0 ? kernels::kIgnoreLabel : stream[i + 1];
      labels[i] = raw_labels[i];
      ends[i] = std::binary_search(offsets.begin(), offsets.end(), start + s + 1) ? 1 : 0;
    }
    data::cut_at_documents(offsets, start, S, documents.data() + start,
                           positions.data() + start, labels.data() + start);
  }
  // The case means what it says: some row holds a one-token document, and some document
  // crosses a row's end.
  bool one_token = false, crossing = false;
  for (std::int64_t i = 0; i < n; ++i) {
    const bool first = i % S == 0 || ends[static_cast<std::size_t>(i - 1)] == 1;
    one_token = one_token || (first && ends[static_cast<std::size_t>(i)] == 1);
    crossing = crossing || (i % S == S - 1 && ends[static_cast<std::size_t>(i)] == 0);
  }
  ASSERT_TRUE(one_token && crossing);

  MemoryTracker tracker;
  LlamaModel model(c.config, tracker, 79);
  perturb_norms(model);
  io::SafetensorsWriter weights;
  for (const NamedTensor& p : named_tensors(model.params())) weights.add(p.name, *p.tensor);
  weights.write(dir_ + "/model.safetensors");
  ASSERT_NO_FATAL_FAILURE(write_config(dir_ + "/config.json", model.config()));
  io::SafetensorsWriter batch_file;
  batch_file.add("input_ids", DType::I32, {B, S}, ids.data());
  batch_file.add("labels", DType::I32, {B, S}, raw_labels.data());
  batch_file.add("ends_document", DType::I32, {B, S}, ends.data());
  batch_file.write(dir_ + "/batch.safetensors");

  const TokenBatch batch{B, S, ids.data(), labels.data(), documents.data(), positions.data()};
  const std::int64_t unmasked = count_unmasked(batch);
  const LossResult loss = model.forward_backward(batch, 1.0 / static_cast<double>(unmasked));

  ASSERT_NO_FATAL_FAILURE(run_oracle({.config = dir_ + "/config.json",
                                      .weights = dir_ + "/model.safetensors",
                                      .batches = {dir_ + "/batch.safetensors"},
                                      .out = dir_ + "/out.safetensors"}));
  const auto out = io::SafetensorsFile::open(dir_ + "/out.safetensors");
  const double ref_loss = out.read_as_f64("loss").at(0);
  EXPECT_LE(std::abs(loss.mean() - ref_loss) / std::abs(ref_loss), 1e-5)
      << "loss " << loss.mean() << " vs " << ref_loss;
  double worst = 0;
  for (const NamedTensor& g : named_tensors(model.grads())) {
    const double err = relative_error(*g.tensor, out.read_as_f64(g.name));
    EXPECT_LE(err, 1e-5) << g.name;
    worst = std::max(worst, err);
  }
  std::cout << "largest gradient error " << worst << ", loss " << loss.mean() << "\n";
}

INSTANTIATE_TEST_SUITE_P(
    Configs, ModelOraclePacked,
    // One case (each oracle run costs seconds): GQA, an odd vocabulary, an explicit head_dim
    // and llama3 RoPE scaling; three rows of 37 (documents shorter and longer than a row).
    ::testing::Values(PackedOracleCase{
        "gqa_head_dim_llama3",
        with_llama3_rope(with_head_dim(make_config(97, 48, 96, 2, 4, 2), 16)), 3, 37}),
    [](const ::testing::TestParamInfo<PackedOracleCase>& info) {
      return std::string(info.param.name);
    });

}  // namespace
}  // namespace origami::oracle
