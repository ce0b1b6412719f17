#include "origami/train/trainer.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cmath>
#include <fstream>
#include <numbers>

#include <fmt/format.h>

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
  double loss_sum = 0, aux = 0;  // aux: a mixture of experts' load-balancing loss
  MoeLoad moe;
  const double aux_weight =
      1.0 / static_cast<double>(std::max<std::size_t>(1, micro_batches.size()));
  for (const TokenBatch& b : micro_batches) {
    const LossResult r = model.forward_backward(b, grad_scale, aux_weight);
    loss_sum += r.sum;
    aux += aux_weight * r.aux;
    moe.add(r.moe);
  }

  StepStats s;
  s.step = optimizer.steps_taken() + 1;
  s.loss = (unmasked > 0 ? loss_sum / static_cast<double>(unmasked) : 0.0) + aux;
  s.tokens = tokens;
  s.moe = moe;
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

}  // namespace origami
