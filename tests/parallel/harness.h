// The parity harness every strategy shares: run a case on one device (LlamaModel, the model
// proven equal to PyTorch in tests/oracle) and on a parallel plan over any communicator
// (threads or MPI), gather every gradient and parameter into full tensors, and compare per
// tensor with ||a - b|| / ||b||.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "origami/kernels/cross_entropy.h"
#include "origami/model/llama.h"
#include "origami/parallel/rank_model.h"
#include "origami/train/trainer.h"
#include "origami/parallel/registry.h"
#include "origami/train/rank_step.h"

namespace origami::parity {

inline ModelConfig make_model(std::int64_t vocab, std::int64_t h, std::int64_t f,
                              std::int64_t heads, std::int64_t kv_heads, std::int64_t layers = 2) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = h;
  c.intermediate_size = f;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.max_position_embeddings = 64;
  c.initializer_range = 0.15;  // far from uniform attention: every path carries signal
  return c;
}

// Mixture of experts (docs/moe.md): the model's attention, `experts` SwiGLU experts of its
// MLP width, top-k, a balancing coefficient large enough that its gradient shows.
inline ModelConfig with_experts(ModelConfig m, std::int64_t experts, std::int64_t top_k) {
  m.num_local_experts = experts;
  m.num_experts_per_tok = top_k;
  m.router_aux_loss_coef = 0.1;
  return m;
}

// The same model with a capacity factor (docs/models.md "Capacity").
inline ModelConfig with_capacity(ModelConfig m, double factor) {
  m.moe_capacity_factor = factor;
  return m;
}

// Masks: every 5th label masked, or the first `masked_prefix` positions of every sequence.
struct Case {
  std::string name;
  ModelConfig model;
  parallel::ParallelConfig plan;
  // The one device's micro-batch of `batch` sequences: under dp each replica runs its own
  // micro-batch of batch / dp of them (the engine's convention: --batch is per replica), so a
  // case of batch = dp runs micro-batch 1 per replica.
  std::int64_t batch = 2, seq = 24;
  int micro = 1;                     // micro-batches per step (gradient accumulation)
  Recompute recompute = Recompute::None;
  std::int64_t masked_prefix = 0;
  int steps = 0;             // AdamW steps compared after the gradient check
  double max_grad_norm = 0;  // clipping threshold in the steps (0: none)
  bool packed = false;       // rows of packed documents (packed_lengths)
  bool shard_optimizer = false;  // the steps' AdamW state sharded over dp (ZeRO-1)
  // Mixture of experts: every router weight 0, so that by the tie rule (docs/models.md)
  // every token picks experts 0 .. k-1 in the first step and the others receive none.
  bool zero_router = false;
  // The parallel run's training precision (core/precision.h): "fp32" or "bf16", and its
  // --grad-reduce-dtype ("fp32" or "bf16", the latter with bf16 only).
  std::string precision = "fp32";
  std::string grad_reduce = "fp32";
};

// Applies Case::zero_router to a model's (or a rank's) parameters.
inline void zero_routers(const Case& c, ModelTensors& params) {
  if (!c.zero_router) return;
  for (LayerTensors& L : params.layers) L.router.zero();
}

// The documents of packed row r of a case (they sum to seq): a one-token document, documents
// shorter than a rank's chunk, and ones that cross chunks and ranks, the pattern shifted per
// row so that the rows' boundaries differ.
inline std::vector<std::int64_t> packed_lengths(std::int64_t seq, std::int64_t r) {
  std::vector<std::int64_t> lengths;
  const std::int64_t pattern[] = {1, 2, 9, 1, 5, 13, 3};
  std::int64_t left = seq;
  for (std::int64_t i = r; left > 0; ++i) {
    const std::int64_t n = std::min(left, pattern[i % 7]);
    lengths.push_back(n);
    left -= n;
  }
  return lengths;
}

// gtest prints a case by its name.
inline void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

struct Data {
  std::vector<std::int32_t> ids, labels;  // [micro * batch, seq] per step, steps+1 sets
  std::vector<std::int32_t> documents;    // the same shape, packed cases only
  std::vector<std::int64_t> positions;
};

inline Data make_data(const Case& c, int sets, unsigned seed = 7) {
  std::mt19937 gen(seed);
  Data d;
  const std::int64_t n = static_cast<std::int64_t>(sets) * c.micro * c.batch * c.seq;
  for (std::int64_t i = 0; i < n; ++i) {
    d.ids.push_back(static_cast<std::int32_t>(gen() % static_cast<unsigned>(c.model.vocab_size)));
    const std::int64_t pos = i % c.seq;
    const bool masked = c.masked_prefix > 0 ? pos < c.masked_prefix : i % 5 == 0;
    d.labels.push_back(
        masked ? kernels::kIgnoreLabel
               : static_cast<std::int32_t>(gen() % static_cast<unsigned>(c.model.vocab_size)));
  }
  if (c.packed) {  // documents per row; a document's last label is no target
    for (std::int64_t r = 0; r < n / c.seq; ++r) {
      std::int32_t doc = 0;
      for (const std::int64_t len : packed_lengths(c.seq, r)) {
        for (std::int64_t i = 0; i < len; ++i) {
          d.documents.push_back(doc);
          d.positions.push_back(i);
        }
        d.labels[static_cast<std::size_t>(static_cast<std::int64_t>(d.documents.size()) - 1)] =
            kernels::kIgnoreLabel;
        ++doc;
      }
    }
  }
  return d;
}

// Micro-batch m of set s: `batch` consecutive sequences.
inline TokenBatch micro_batch(const Case& c, const Data& d, int set, int m) {
  const std::int64_t first = (static_cast<std::int64_t>(set) * c.micro + m) * c.batch;
  TokenBatch b{c.batch, c.seq, d.ids.data() + first * c.seq, d.labels.data() + first * c.seq};
  if (c.packed) {
    b.documents = d.documents.data() + first * c.seq;
    b.positions = d.positions.data() + first * c.seq;
  }
  return b;
}

struct Result {
  double loss = 0;  // mean loss of the gradient check
  double grad_norm = 0;
  MoeLoad moe;  // the gradient check's expert load (mixture of experts; empty when dense)
  std::vector<std::string> names;
  std::vector<std::vector<float>> grads;  // full tensors, named_tensors() order
  std::vector<double> step_losses;        // the AdamW steps' losses
  std::vector<float> clip_coefficients;
  std::vector<std::vector<float>> params;  // after the steps
  MemoryStats memory;
};

inline std::vector<float> to_vector(const Tensor& t) {
  return {t.f32(), t.f32() + t.numel()};
}

// lr 2e-3: AdamW divides by sqrt(v), which amplifies the ~1e-6 relative rounding differences
// of gradients whose running mean nearly cancels; at lr 1e-2 the worst tensor after five
// steps reached 8.7e-5 (Release) and 1.02e-4 (Debug) against the 1e-4 bound, at 2e-3 it is
// 5x smaller, while a wrong gradient still moves a tensor by ~lr*steps/0.15 ~ 7e-2.
inline kernels::AdamWHyper test_hyper() {
  return {.lr = 2e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
}
constexpr std::uint64_t kSeed = 1234;

inline Result run_single(const Case& c, const Data& d) {
  MemoryTracker tracker("single");
  LlamaModel model(c.model, tracker, kSeed);
  zero_routers(c, model.params());
  Result r;
  std::vector<TokenBatch> micro;
  for (int m = 0; m < c.micro; ++m) micro.push_back(micro_batch(c, d, 0, m));
  std::int64_t count = 0;
  for (const TokenBatch& b : micro) count += count_unmasked(b);
  const double scale = count > 0 ? 1.0 / static_cast<double>(count) : 0.0;
  double sum = 0, aux = 0;  // aux: a mixture of experts' load-balancing loss
  for (const TokenBatch& b : micro) {
    const LossResult lr = model.forward_backward(b, scale, 1.0 / c.micro);
    sum += lr.sum;
    aux += lr.aux / c.micro;
    r.moe.add(lr.moe);
  }
  r.loss = (count > 0 ? sum / static_cast<double>(count) : 0.0) + aux;
  r.grad_norm = global_grad_norm(model.grads());
  for (NamedTensor& g : named_tensors(model.grads())) {
    r.names.push_back(g.name);
    r.grads.push_back(to_vector(*g.tensor));
  }
  if (c.steps > 0) {
    AdamW opt(c.model, tracker, test_hyper());
    for (int s = 1; s <= c.steps; ++s) {
      std::vector<TokenBatch> mb;
      for (int m = 0; m < c.micro; ++m) mb.push_back(micro_batch(c, d, s, m));
      const StepStats st = train_step(model, opt, mb, test_hyper().lr, c.max_grad_norm);
      r.step_losses.push_back(st.loss);
      r.clip_coefficients.push_back(st.clip_coefficient);
    }
    for (NamedTensor& p : named_tensors(model.params())) r.params.push_back(to_vector(*p.tensor));
  }
  r.memory = tracker.stats();
  return r;
}

// Runs on every rank of `world`; the gathered result is returned on every rank.
inline Result run_parallel(const Case& c, const Data& d, comm::Communicator& world) {
  parallel::validate_plan(c.plan, c.model, c.seq, c.batch / c.plan.dp, world.size());
  parallel::ParallelGroups groups(world, c.plan);
  MemoryTracker& tracker = world.tracker();
  parallel::RankModel model(c.model, groups, c.seq, c.recompute, tracker, kSeed,
                            Precision::parse(c.precision, c.grad_reduce));
  zero_routers(c, model.params());
  model.refresh_compute_weights();  // after the routers' edit of the master
  const int P = groups.dp().size(), p = groups.dp().rank();
  auto local_micro = [&](int set) {
    std::vector<parallel::LocalBatch> out;
    for (int m = 0; m < c.micro; ++m) {
      TokenBatch b = micro_batch(c, d, set, m);
      const std::int64_t per = c.batch / P;  // this data-parallel rank's sequences
      b.batch = per;
      b.input_ids += p * per * c.seq;
      b.labels += p * per * c.seq;
      if (b.documents != nullptr) {
        b.documents += p * per * c.seq;
        b.positions += p * per * c.seq;
      }
      out.push_back(model.localize(b));
    }
    return out;
  };
  Result r;
  {
    const std::vector<parallel::LocalBatch> micro = local_micro(0);
    const std::int64_t count = model.global_unmasked(micro);
    const double scale = count > 0 ? 1.0 / static_cast<double>(count) : 0.0;
    zero_tensors(model.grads());
    parallel::RankModel::Accumulated acc = model.accumulate(micro, scale);
    model.reduce_gradients();
    model.wait_for_stages();
    model.sum_over_stages(acc);
    r.moe = acc.moe;
    const double sum = model.global_loss_sum(acc.loss_sum);
    r.loss = (count > 0 ? sum / static_cast<double>(count) : 0.0) + acc.aux;
    r.grad_norm = model.grad_norm();
    MemoryTracker scratch("gather");
    for (Tensor& t : model.gather(model.grads(), scratch)) r.grads.push_back(to_vector(t));
    for (const parallel::ShardSpec& s : model.specs()) r.names.push_back(s.name);
  }
  r.memory = tracker.stats();
  if (c.steps > 0) {
    AdamW opt = parallel::make_rank_optimizer(model, tracker, test_hyper(), c.shard_optimizer);
    for (int s = 1; s <= c.steps; ++s) {
      const parallel::ParallelStepStats st = parallel::parallel_train_step(
          model, opt, local_micro(s), test_hyper().lr, c.max_grad_norm);
      r.step_losses.push_back(st.loss);
      r.clip_coefficients.push_back(st.clip_coefficient);
    }
    MemoryTracker scratch("gather");
    for (Tensor& t : model.gather(model.params(), scratch)) r.params.push_back(to_vector(t));
  }
  return r;
}

inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += std::pow(double(a[i]) - double(b[i]), 2);
    ref += std::pow(double(b[i]), 2);
  }
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

inline double relative_difference(double a, double b) {
  return b != 0 ? std::abs(a - b) / std::abs(b) : std::abs(a - b);
}

constexpr double kGradTolerance = 1e-5;
constexpr double kStepTolerance = 1e-4;

// GoogleTest's name for a parameterised case: the case's own name (every parity suite's).
inline std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.name;
}

// Loss, every gradient, the gradient norm, and (when the case takes steps) the step losses
// and final parameters of a parallel run against the single-device run.
inline void expect_equal(const Case& c, const Result& par, const Result& ref) {
  EXPECT_LE(relative_difference(par.loss, ref.loss), kGradTolerance)
      << c.name << ": loss " << par.loss << " vs " << ref.loss;
  ASSERT_EQ(par.grads.size(), ref.grads.size());
  for (std::size_t i = 0; i < ref.grads.size(); ++i) {
    ASSERT_EQ(par.names[i], ref.names[i]);
    ASSERT_EQ(par.grads[i].size(), ref.grads[i].size()) << ref.names[i];
    EXPECT_LE(relative_difference(par.grads[i], ref.grads[i]), kGradTolerance)
        << c.name << ": gradient of " << ref.names[i];
  }
  EXPECT_LE(relative_difference(par.grad_norm, ref.grad_norm), kGradTolerance) << c.name;
  // The expert load (docs/moe.md "Load metrics"): exactly one device's counts, and every
  // token's k assignments of every layer and micro-batch counted once.
  EXPECT_EQ(par.moe.tokens_per_expert, ref.moe.tokens_per_expert) << c.name;
  EXPECT_EQ(par.moe.dropped, ref.moe.dropped) << c.name;
  if (c.model.is_moe()) {
    std::int64_t assignments = par.moe.dropped;
    for (const std::int64_t t : par.moe.tokens_per_expert) assignments += t;
    EXPECT_EQ(assignments, c.batch * c.seq * c.micro * c.model.num_experts_per_tok *
                               c.model.num_hidden_layers)
        << c.name;
    EXPECT_EQ(par.moe.tokens_per_expert.size(),
              static_cast<std::size_t>(c.model.num_local_experts));
  }
  double worst_grad = 0;
  std::string worst_grad_name;
  for (std::size_t i = 0; i < ref.grads.size(); ++i) {
    const double diff = relative_difference(par.grads[i], ref.grads[i]);
    if (diff > worst_grad) {
      worst_grad = diff;
      worst_grad_name = ref.names[i];
    }
  }
  std::printf("  %s: worst gradient difference %.2e (%s)\n", c.name.c_str(), worst_grad,
              worst_grad_name.c_str());
  ASSERT_EQ(par.step_losses.size(), ref.step_losses.size());
  for (std::size_t s = 0; s < ref.step_losses.size(); ++s)
    EXPECT_LE(relative_difference(par.step_losses[s], ref.step_losses[s]), kStepTolerance)
        << c.name << ": loss of step " << s + 1;
  ASSERT_EQ(par.params.size(), ref.params.size());
  double worst = 0;
  for (std::size_t i = 0; i < ref.params.size(); ++i) {
    const double diff = relative_difference(par.params[i], ref.params[i]);
    worst = std::max(worst, diff);
    EXPECT_LE(diff, kStepTolerance)
        << c.name << ": parameter " << ref.names[i] << " after " << c.steps << " steps";
  }
  if (!ref.params.empty())
    std::printf("  %s: worst parameter difference after %d steps %.2e\n", c.name.c_str(), c.steps,
                worst);
}

}  // namespace origami::parity
