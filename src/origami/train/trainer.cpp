#include "origami/train/trainer.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cmath>
#include <fstream>
#include <numbers>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "origami/kernels/simd.h"
#include "origami/kernels/threads.h"
#include "origami/parallel/shard_spec.h"
#include "origami/train/checkpoint_loop.h"
#include "origami/train/memory_check.h"
#include "origami/train/parallel_train.h"

namespace origami {

StepStats train_step(LlamaModel& model, AdamW& optimizer,
                     const std::vector<TokenBatch>& micro_batches, float lr,
                     double max_grad_norm) {
  const auto start = std::chrono::steady_clock::now();
  std::int64_t unmasked = 0, tokens = 0;
  for (const TokenBatch& b : micro_batches) {
    unmasked += count_unmasked(b);
    tokens += b.batch * b.seq;
  }
  // The step's loss is the mean over all its unmasked labels; no labels: loss 0, no gradient.
  const double grad_scale = unmasked > 0 ? 1.0 / static_cast<double>(unmasked) : 0.0;
  zero_tensors(model.grads());
  double loss_sum = 0;
  for (const TokenBatch& b : micro_batches) loss_sum += model.forward_backward(b, grad_scale).sum;

  StepStats s;
  s.step = optimizer.steps_taken() + 1;
  s.loss = unmasked > 0 ? loss_sum / static_cast<double>(unmasked) : 0.0;
  s.tokens = tokens;
  s.lr = lr;
  s.grad_norm = global_grad_norm(model.grads());
  check_step_finite(s.step, s.loss, s.grad_norm);
  s.clip_coefficient =
      max_grad_norm > 0 ? clip_gradients(model.grads(), s.grad_norm, max_grad_norm) : 1.0f;
  optimizer.step(model.params(), model.grads(), lr);
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

float learning_rate(std::int64_t step, std::int64_t total, std::int64_t warmup, float peak,
                    float min_ratio) {
  if (warmup > 0 && step <= warmup)
    return peak * static_cast<float>(step) / static_cast<float>(warmup);
  const std::int64_t span = std::max<std::int64_t>(1, total - warmup);
  const double progress =
      std::clamp(static_cast<double>(step - warmup) / static_cast<double>(span), 0.0, 1.0);
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return static_cast<float>(peak * (min_ratio + (1.0 - min_ratio) * cosine));
}

ModelConfig model_for_run(const ModelConfig& model, std::int64_t seq) {
  ModelConfig m = model;
  m.max_position_embeddings = std::min(m.max_position_embeddings, seq);
  return m;
}

std::ofstream open_metrics(const std::string& path) {
  std::ofstream metrics;
  if (path.empty()) return metrics;
  metrics.open(path);
  if (!metrics)
    throw ConfigError(fmt::format("cannot write --metrics {}: {}", path, std::strerror(errno)));
  return metrics;
}

namespace {

void check_options(const TrainOptions& o) {
  auto positive = [](std::int64_t v, const char* flag) {
    if (v < 1) throw ConfigError(fmt::format("{} must be at least 1 (got {})", flag, v));
  };
  positive(o.seq, "--seq");
  positive(o.batch, "--batch");
  positive(o.grad_accum, "--grad-accum");
  positive(o.steps, "--steps");
  positive(o.threads, "--threads");
  positive(o.log_every, "--log-every");  // a divisor of the step number
  if (o.warmup < 0) throw ConfigError(fmt::format("--warmup must be >= 0 (got {})", o.warmup));
  // The hyperparameters' ranges (NaN and inf fail every comparison): AdamW moves each weight
  // by about lr per step, so lr above 1 diverges at once, and lr x weight decay above 1 would
  // flip the sign of the weights.
  auto within = [](double v, double lo, double hi, bool lo_open, const char* flag) {
    if (!(std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi))
      throw ConfigError(fmt::format("{} must be a number in {}{}, {}] (got {})", flag,
                                    lo_open ? "(" : "[", lo, hi, v));
  };
  within(o.lr, 0, 1, true, "--lr");
  within(o.weight_decay, 0, 1, false, "--weight-decay");
  within(o.min_lr_ratio, 0, 1, false, "--min-lr-ratio");
  within(o.max_grad_norm, 0, 1e30, false, "--max-grad-norm");
  if (!(o.peak_gflops > 0))
    throw ConfigError(fmt::format("--peak-gflops must be positive (got {})", o.peak_gflops));
  if (o.seq > o.model.max_position_embeddings)
    throw ConfigError(fmt::format("--seq {} exceeds the model's max_position_embeddings {}; "
                                  "shorten --seq or raise max_position_embeddings in the config",
                                  o.seq, o.model.max_position_embeddings));
  validate(o.model);
}

}  // namespace


TrainResult train(const TrainOptions& o, const std::function<void(const std::string&)>& log) {
  check_options(o);
  if (o.strategy != "single" || o.degree != 1 || !o.mesh.empty() || o.tp_sequence_parallel ||
      o.backend == "mpi" || launched_by_mpirun())
    return train_parallel(o, log);
  if (o.link.enabled)
    throw ConfigError("--link-model needs a parallel run (one device sends nothing): choose "
                      "--strategy and --degree, or --mesh");
  if (o.backend != "auto" && o.backend != "threads")
    throw ConfigError(fmt::format("unknown --backend '{}'; use threads or mpi", o.backend));
  const data::TokenDataset dataset =
      data::TokenDataset::load(o.data_path, o.tokenizer_path, o.model.vocab_size);
  dataset.check_vocab(o.model.vocab_size);
  if (dataset.size() < o.seq + 1)
    throw ConfigError(fmt::format("the data ({}) has {} tokens, fewer than --seq + 1 = {}; "
                                  "use a shorter --seq or more data",
                                  dataset.label(), dataset.size(), o.seq + 1));
  std::ofstream metrics = open_metrics(o.metrics_path);

  check_run_memory(o, parallel::ParallelConfig{}, 1);  // before the first allocation
  const ckpt::SaveDirLock save_dir = ckpt::open_save_dir(o, nullptr, log);  // before any compute
  kernels::set_thread_count(o.threads);
  MemoryTracker tracker("single device");
  tracker.set_cap(o.memory_cap);
  LlamaModel model(model_for_run(o.model, o.seq), tracker, o.seed, parse_recompute(o.recompute));
  AdamW optimizer(o.model, tracker,
                  {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = 1e-8f,
                   .weight_decay = o.weight_decay});
  const std::vector<parallel::ShardSpec> specs = parallel::make_shard_specs(o.model, 1, 0);
  const ckpt::RankState saved{&specs, &model.params(), &optimizer};
  const std::int64_t done = ckpt::begin_run(o, nullptr, saved, log);
  data::BatchSampler sampler(dataset, o.seed, done * o.grad_accum);
  const double flops_per_step = training_flops(o.model, o.batch, o.seq) * static_cast<double>(o.grad_accum);

  log(fmt::format("model: {} parameters (h {}, {} layers, {} heads, {} kv heads, intermediate {}, "
                  "vocabulary {}); data: {} ({} tokens)",
                  o.model.num_parameters(), o.model.hidden_size, o.model.num_hidden_layers,
                  o.model.num_attention_heads, o.model.num_key_value_heads,
                  o.model.intermediate_size, o.model.vocab_size, dataset.label(), dataset.size()));
  log(fmt::format("run: {} steps of {} x {} sequences of {} tokens, {} threads; MFU against a "
                  "stated peak of {:.0f} GFLOP/s",
                  o.steps, o.grad_accum, o.batch, o.seq, o.threads, o.peak_gflops));

  TrainResult result;
  for (std::int64_t step = done + 1; step <= o.steps; ++step) {
    std::vector<data::Batch> owned;
    std::vector<TokenBatch> micro;
    for (std::int64_t m = 0; m < o.grad_accum; ++m) {
      owned.push_back(sampler.next_batch(o.batch, o.seq, tracker));
    }
    for (const data::Batch& b : owned)
      micro.push_back({o.batch, o.seq, b.input_ids.data<std::int32_t>(), b.labels.data<std::int32_t>()});
    const float lr = learning_rate(step, o.steps, o.warmup, o.lr, o.min_lr_ratio);
    const StepStats s = train_step(model, optimizer, micro, lr, o.max_grad_norm);
    const double tokens_per_s = static_cast<double>(s.tokens) / s.seconds;
    const double gflops = flops_per_step / s.seconds / 1e9;
    if (metrics.is_open()) {
      nlohmann::json j = {{"step", s.step}, {"loss", s.loss}, {"lr", s.lr},
                          {"grad_norm", s.grad_norm}, {"tokens", s.tokens},
                          {"seconds", s.seconds}, {"tokens_per_s", tokens_per_s},
                          {"gflops", gflops}, {"mfu", gflops / o.peak_gflops},
                          {"simd", kernels::simd_target()},
                          {"peak_bytes", tracker.peak_total()}};
      metrics << j.dump() << "\n";
    }
    if (step == 1 || step % o.log_every == 0 || step == o.steps) {
      log(fmt::format("step {:>5}  loss {:.4f}  lr {:.2e}  grad norm {:.3f}  {:>8.0f} tokens/s  "
                      "{:>6.1f} GFLOP/s  MFU {:.1f}%",
                      step, s.loss, s.lr, s.grad_norm, tokens_per_s, gflops,
                      100.0 * gflops / o.peak_gflops));
    }
    result.steps.push_back(s);
    ckpt::after_step(o, nullptr, saved, step, "single", log);
  }
  result.memory = tracker.stats();
  log("peak memory by category:\n" + tracker.report());
  return result;
}

}  // namespace origami
