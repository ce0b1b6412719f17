// Times full training steps (forward, backward, clipping, AdamW) of the single-device model
// and prints one JSON line: tokens/s, seconds per step, the tracker's peak bytes and the
// process's peak resident memory. bench/compare_pytorch.sh runs it beside the PyTorch model.
//
//   train_step_bench --seq 2048 --batch 1 --threads 2 --steps 5 [--model small]
#include <sys/resource.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <random>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "origami/kernels/simd.h"
#include "origami/kernels/threads.h"
#include "origami/model/llama.h"
#include "origami/train/trainer.h"

int main(int argc, char** argv) {
  CLI::App app{"time training steps of the single-device model"};
  std::int64_t seq = 1024, batch = 1, steps = 5;
  int threads = 1;
  std::string preset = "small";
  app.add_option("--seq", seq);
  app.add_option("--batch", batch);
  app.add_option("--steps", steps);
  app.add_option("--threads", threads);
  app.add_option("--model", preset);
  CLI11_PARSE(app, argc, argv);

  using namespace origami;
  kernels::use_simd_target_from_env();
  kernels::set_thread_count(threads);
  ModelConfig config = model_preset(preset);
  config.max_position_embeddings = std::max(config.max_position_embeddings, seq);
  MemoryTracker tracker;
  LlamaModel model(config, tracker, 1);
  AdamW optimizer(config, tracker, {});
  std::mt19937 gen(1);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * seq)), labels(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<std::int32_t>(gen() % static_cast<unsigned>(config.vocab_size));
    labels[i] = static_cast<std::int32_t>(gen() % static_cast<unsigned>(config.vocab_size));
  }
  const std::vector<TokenBatch> micro{{batch, seq, ids.data(), labels.data()}};
  train_step(model, optimizer, micro, 1e-4f, 1.0);  // warm-up: first-touch pages, JIT kernels
  const double cpu_start = std::clock() / double(CLOCKS_PER_SEC);
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t s = 0; s < steps; ++s) train_step(model, optimizer, micro, 1e-4f, 1.0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // CPU seconds of the whole process: on a shared machine, tokens per CPU-second is the
  // steadier figure (wall time includes time other processes held the cores).
  const double cpu_seconds = std::clock() / double(CLOCKS_PER_SEC) - cpu_start;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double tokens = static_cast<double>(batch * seq * steps);
  nlohmann::json out = {{"impl", "origami"},
                        {"seq", seq},
                        {"batch", batch},
                        {"threads", threads},
                        {"simd", kernels::simd_target()},
                        {"tokens_per_s", tokens / seconds},
                        {"step_seconds", seconds / static_cast<double>(steps)},
                        {"tokens_per_cpu_s", tokens / cpu_seconds},
                        {"gflops", training_flops(config, batch, seq) * static_cast<double>(steps) /
                                       seconds / 1e9},
                        {"tracker_peak_bytes", tracker.peak_total()},
                        {"peak_rss_bytes", static_cast<std::int64_t>(usage.ru_maxrss) * 1024}};
  std::cout << out.dump() << std::endl;
  return 0;
}
