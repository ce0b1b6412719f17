// Training: the options, the single-device step (micro-batches, gradient accumulation,
// global-norm clipping, AdamW; the reference the strategies are compared with) and the run
// loop for every layout with its reports (loss, tokens/s, GFLOP/s, MFU, memory).
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "origami/checkpoint/checkpoint_options.h"
#include "origami/comm/link_model.h"
#include "origami/data/dataset.h"
#include "origami/kernels/optimizer.h"
#include "origami/model/llama.h"
#include "origami/model/optimizer.h"

namespace origami {

struct StepStats {
  std::int64_t step = 0;  // 1-based
  double loss = 0;        // mean over the unmasked labels of the whole step
  std::int64_t tokens = 0;
  double grad_norm = 0;   // before clipping
  float clip_coefficient = 1;
  float lr = 0;
  double seconds = 0;
  double data_wait_seconds = 0;  // how long the step waited for its batches (data/prefetch.h)
  MoeLoad moe;  // a mixture of experts' load over the step's micro-batches; empty when dense
};

// One optimizer step over `micro_batches` (their losses are averaged over all their unmasked
// labels together): zero grads, forward+backward each, clip to max_grad_norm (<= 0: no
// clipping), AdamW with learning rate lr.
StepStats train_step(LlamaModel& model, AdamW& optimizer, const std::vector<TokenBatch>& micro_batches,
                     float lr, double max_grad_norm);

// Learning rate of step `step` (1-based): linear warm-up over `warmup` steps, then cosine decay
// to min_ratio * peak at `total` steps.
float learning_rate(std::int64_t step, std::int64_t total, std::int64_t warmup, float peak,
                    float min_ratio);

struct TrainOptions {
  ModelConfig model;
  std::string data_path;  // a --data spec (data.h TokenDataset::open); empty: the built-in corpus
  std::string data_dtype = "uint16";  // ids of a flat .bin without a header
  std::string data_order = "random";  // or "epoch" (data.h)
  // --document-masking: rows carry their documents (docs/data.md "Packed documents"); off:
  // unbroken causal rows, as before.
  bool document_masking = false;
  // --eos-id: with document_masking, a flat .bin's documents end after each token of this id
  // (data/dataset.h DataOptions::eos_id); -1: not given.
  std::int64_t eos_id = -1;
  std::string tokenizer_path;  // text data's tokenizer (tokenizer/tokenizer.h); empty: bytes
  std::int64_t seq = 256;
  // The batch (train/batch_size.h): `batch` sequences per micro-batch of EACH data-parallel
  // replica, `grad_accum` micro-batches per step, so a step takes global_batch = batch x dp x
  // grad_accum sequences. global_batch 0: not given (train() sets it); given, the one of batch
  // and grad_accum not fixed is derived. The *_fixed flags say what the user gave (the CLI:
  // the flag appeared): only the others may be changed by --global-batch or by a resume under
  // another dp.
  std::int64_t batch = 8;
  std::int64_t grad_accum = 1;
  std::int64_t global_batch = 0;
  bool batch_fixed = false, grad_accum_fixed = false, global_batch_fixed = false;
  std::int64_t steps = 120;
  std::int64_t warmup = 10;
  float lr = 2e-3f;
  float min_lr_ratio = 0.1f;
  float weight_decay = 0.1f;
  float beta1 = 0.9f, beta2 = 0.95f;
  double max_grad_norm = 1.0;
  std::uint64_t seed = 1234;
  int threads = 1;
  double peak_gflops = 0;  // the stated peak MFU is measured against (> 0)
  std::string metrics_path;  // JSON lines, one per step ("" = none)
  std::optional<std::int64_t> memory_cap;
  int log_every = 10;
  // Parallelism: a registered strategy (parallel/registry.h) with a degree, or a mesh such as
  // "dp=2,tp=2,sp=2"; TP's sequence-parallel regions; the token layout on the token axis; the
  // recompute policy; the transport ("auto": mpi under mpirun, else threads).
  std::string strategy = "single";
  int degree = 1;
  std::string mesh;
  bool tp_sequence_parallel = false;
  std::string layout = "zigzag";
  std::string tsp_schedule = "broadcast-ring";  // TSP only: broadcast-ring or allgather
  std::string moe_schedule = "ring";  // TSP with experts only: ring or expert (docs/moe.md)
  // --pp-layers "3,5": layers per pipeline stage, first to last (parallel/pipeline_stages.h);
  // empty: the balanced default.
  std::string pp_layers;
  // --pp-virtual v: model chunks per pipeline rank; v > 1 runs interleaved 1F1B
  // (parallel/pipeline_schedule.h), with --pp-layers then giving pp x v chunk counts.
  int pp_virtual = 1;
  std::string recompute = "none";
  // --precision (core/precision.h): "fp32", or "bf16" mixed precision (fp32 master weights,
  // moments and gradients; a bf16 compute copy for every linear) under every layout, for
  // dense models.
  std::string precision = "fp32";
  // --grad-reduce-dtype: "fp32", or "bf16" gradients (held, accumulated and reduced in bf16;
  // --precision bf16 only).
  std::string grad_reduce_dtype = "fp32";
  // --shard-optimizer (ZeRO-1, model/optimizer.h): AdamW's state split over the dp axis, the
  // dp gradient reduction a reduce-scatter, the parameters all-gathered after the step. At
  // dp 1 it changes nothing (the run says so once).
  bool shard_optimizer = false;
  std::string backend = "auto";
  // A parallel run's link model (comm/link_model.h): when enabled, each message completes no
  // earlier than alpha + bytes / beta after it was posted, so communication and its overlap
  // can be measured on this machine. Off by default.
  comm::LinkModel link;
  CheckpointOptions checkpoint;  // --save-dir, --save-every, --resume, --init-from
};

struct TrainResult {
  std::vector<StepStats> steps;
  MemoryStats memory;                 // world rank 0's tracker (the only one on one device)
  std::vector<MemoryStats> rank_memory;  // every rank's, parallel runs
};

// The model as a run of `seq` tokens builds it: RoPE tables for its positions only (a
// config's max_position_embeddings of 2^25 made 2.1 GB of tables for --seq 16). The values
// of each position's table row do not depend on the table's length.
ModelConfig model_for_run(const ModelConfig& model, std::int64_t seq);

// The --metrics file opened for writing (closed when `path` is empty); ConfigError with the
// operating system's reason.
std::ofstream open_metrics(const std::string& path);

// Runs the whole loop (train_loop.cpp) for any layout — one device is the degree-1 mesh —
// printing progress with `log` (one line per call, world rank 0 only).
TrainResult train(const TrainOptions& options, const std::function<void(const std::string&)>& log);

}  // namespace origami
