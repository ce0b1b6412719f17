// Element sizes by kind of tensor: the precision profile of a run. The dry run (docs/design.md
// §10) and the planner account bytes with a profile, so that a bf16 run's memory and traffic
// are measurable before it runs.
//
// Training under --precision bf16 (issue 17, first slice; `origami train`, RankModel): the one
// statement of what is held and computed in which type.
//   fp32  the master parameters: every tensor, what AdamW steps, checkpoints save and load, the
//         RMSNorms read; accounted under MemCategory::OptimizerState, as the planner's
//         `master` below (so the tracker prints them apart from the compute copy);
//         AdamW's two moments and the whole update;
//         weight gradients, accumulated over micro-batches and reduced over dp in fp32 (under
//         `--grad-reduce-dtype bf16`, below, in bf16); the gradient norm (in double) and the
//         clipping coefficient;
//         RMSNorm weights and statistics, softmax statistics, the logits, the loss;
//         the statistics saved for backward (RMSNorm's rstd, attention's LSE); in this slice
//         also the residual stream, workspaces and communication buffers (but K/V gathers).
//   bf16  the compute copy (model/compute_copy.h, MemCategory::Parameters): the embedding,
//         W_Q/W_K/W_V/W_O, W_gate/W_up/W_down and an untied LM head, rounded to nearest even
//         from the master after every optimizer step and after a checkpoint load. Every
//         linear's forward and both backward products read it, and so does the embedding
//         lookup (rows widened exactly);
//         K and V's values: rounded to bf16 after their projection and RoPE (held in fp32
//         tensors, AttentionDims::kv) and so gathered over a sequence axis in bf16, exactly;
//         the saved activations (block inputs, Q/K/V, attention outputs, gate/up), held in
//         bf16 from a layer's forward to its backward (model/saved_dtype.h).
//   --grad-reduce-dtype bf16 (Megatron's grad-reduce-in-bf16; bf16 profile only): the rank's
//         gradients held in bf16 (2 bytes per parameter instead of 4, MemCategory::Gradients),
//         every reduction of them over dp, sp, tp or the TSP axis summed in bf16 (each hop adds
//         in fp32 and rounds once, comm/reduce_op.cpp), clipping rounding the scaled values,
//         AdamW widening them exactly. The kernels still write fp32: each unit (one layer, the
//         LM head with the final norm, the embedding) writes an fp32 staging copy for one
//         micro-batch's backward, added into the bf16 buffer (one rounding) and freed when the
//         unit's backward has ended (model/gradient_staging.h, accounted as workspace).
//   products (kernels/gemm.h) where the CPU has bf16 dot products: the activation operands (x,
//         dy) rounded to bf16, oneDNN's bf16 matmul, fp32 accumulation and fp32 outputs; elsewhere
//         the widening path: W widened exactly, fp32 GEMMs on the fp32 activations.
// Layouts: every one (the strategies' blocks read the compute copy; TSP broadcasts, rings and
// gathers its shards in bf16, its in-layer gradient messages in fp32; every K/V gather is
// bf16), dense models only (parallel/training_precision.h refuses a mixture of experts).
// Accounting against this profile's prediction: the planner and the dry run count
// activations, workspace and communication at 2 bytes and the norms' weights in a bf16 copy
// too; the real run holds those in fp32 and has no bf16 norm copy (docs/dry-run.md).
#pragma once

#include <cstdint>
#include <string>

#include "origami/core/memory_tracker.h"

namespace origami {

struct Precision {
  std::string name = "fp32";
  std::int64_t parameters = 4;     // the weights the kernels read
  std::int64_t master = 0;         // an extra fp32 copy kept by the optimizer (0: none),
                                   // accounted as optimizer state
  std::int64_t gradients = 4;      // weight gradients (and their accumulators)
  std::int64_t moments = 4;        // each of AdamW's two moments
  std::int64_t activations = 4;    // saved activations and workspace
  std::int64_t communication = 4;  // every element a transfer moves
  std::int64_t logits = 4;         // the LM head's logits blocks (softmax in fp32)

  // Everything in fp32 (what the engine computes in).
  static Precision fp32();
  // Mixed precision: bf16 weights, activations and communication; fp32 master weights,
  // gradients, Adam moments and logits.
  static Precision bf16();
  // Whether a run with this profile computes its linears on a bf16 compute copy (training
  // above; inference: docs/inference.md).
  bool computes_in_bf16() const { return name == "bf16"; }
  // "fp32" | "bf16"; ConfigError naming the known profiles otherwise. `grad_reduce`
  // (--grad-reduce-dtype): "fp32", or "bf16" gradients (the bf16 profile only; ConfigError
  // naming the flag otherwise).
  static Precision parse(const std::string& name, const std::string& grad_reduce = "fp32");
  // Whether the gradients are held and reduced in bf16 (--grad-reduce-dtype bf16).
  bool reduces_gradients_in_bf16() const { return gradients == 2; }
  std::string grad_reduce_name() const { return gradients == 2 ? "bf16" : "fp32"; }

  // Optimizer-state bytes per parameter: the master copy plus two moments.
  std::int64_t optimizer_per_parameter() const { return master + 2 * moments; }

  // Makes `tracker` account the engine's fp32 tensors with this profile's sizes per category
  // (the dry run): parameters, gradients, optimizer state (master + 2 moments over AdamW's two
  // state tensors), activations and workspace, communication buffers, logits.
  void apply_to(MemoryTracker& tracker) const;
};

}  // namespace origami
