// TSP with the allgather schedule (schedule.h states it: shapes, conjugate pairs, bytes,
// resident set). TSP's layout, embedding, LM head and reductions (TspOps, whose blocks these
// are not): the attention and MLP blocks all-gather their layer's whole weight (prefetched one
// block ahead, as the driver orders the blocks), compute every head group / MLP column block
// on the rank's own rows with the shared block kernels, and reduce-scatter the weight gradient
// so that each owner receives its shard's, summed over every rank's tokens.
#pragma once

#include <cstdint>

#include "origami/parallel/strategies/tsp_allgather/schedule.h"
#include "origami/parallel/strategies/tsp/tsp_ops.h"

namespace origami::parallel {

class TspAllgatherOps final : public TspOps {
 public:
  TspAllgatherOps(const ModelConfig& config, ParallelGroups& groups, const TokenLayout& layout,
                  ModelTensors& params, ModelTensors& grads, MemoryTracker& tracker);
  ~TspAllgatherOps() override;

  // nullptr (the step's micro-batches are done) also waits the last reduce-scatter: a
  // pipeline stage without the embedding ends its backward with one in flight.
  void set_batch(const LocalBatch* batch) override;
  void embed_backward(const float* dx) override;
  // Waits the reduce-scatter in flight and adds its shard (block_ops.h).
  void settle_gradients() override { finish_reduce_scatter(); }
  void attention_forward(std::int64_t l, const float* n, AttentionSaved& s, float* x,
                         const ForwardStep& step) override;
  void attention_backward(std::int64_t l, const float* n, const AttentionSaved& s, const float* dx,
                          float* dn) override;
  void mlp_forward(std::int64_t l, const float* n, MlpSaved& s, float* x) override;
  void mlp_backward(std::int64_t l, const float* n, MlpSaved& s, const float* dx,
                    float* dn) override;

  // Whether a weight gather or gradient reduce-scatter is still in flight (none may be
  // between steps or after a forward alone).
  bool in_flight() const { return prefetch_.layer >= 0 || reducing_.layer >= 0; }

 private:
  enum class Block { Attention, Mlp };
  // One block's whole weight [D][F] (rank j's packed shard at j·F), gathered or in flight.
  struct Gathered {
    Block block = Block::Attention;
    std::int64_t layer = -1;  // -1: none
    Tensor all;
    comm::Handle done;
  };
  // One block's weight gradient [D][F] being reduce-scattered to its owners.
  struct Reducing {
    Block block = Block::Attention;
    std::int64_t layer = -1;
    Tensor in, out;
    comm::Handle done;
  };

  tsp_allgather::Shapes shapes() const;
  SequenceAxis sequence_axis() const;  // the tsp axis as the K/V gathers see it
  std::int64_t floats(Block b) const;
  // Packs this rank's shard of (b, l) into its slot of a new [D][F] buffer and starts the
  // all-gather on the shard communicator.
  Gathered start_gather(Block b, std::int64_t l);
  // The weights of (b, l), waited: the prefetch when it is theirs, else gathered now (a
  // prefetch for another block is drained first, so nothing stays in flight).
  Gathered take(Block b, std::int64_t l);
  // Starts the gather of the block the driver runs next (nothing for a layer out of range).
  void prefetch(Block b, std::int64_t l);
  void drain_prefetch();
  // Posts the reduce-scatter of a block's whole-weight gradient, after waiting the previous
  // one (the reduce-scatters run one block behind: each is waited at the end of the next block).
  void reduce_scatter(Block b, std::int64_t l, Tensor grad);
  void finish_reduce_scatter();  // waits and adds the owner's shard into its gradients

  Gathered prefetch_;
  Reducing reducing_;
  // Said by the driver (ForwardStep) at the attention forward of the current layer: the
  // attention layer that runs after this layer's MLP forward (l+1; l itself inside a full
  // recompute, whose next block is MLP l's backward; -1: the head).
  std::int64_t next_attention_layer_ = -1;
  // Whether the backward recomputes each layer's forward (the driver said next_attention_layer
  // == l at layer l's forward): attention l's backward then prefetches attention l-1.
  bool backward_recomputes_ = false;
};

// TSP's Strategy (shard specs, reduction axes) with the allgather blocks.
Strategy tsp_allgather_strategy(const ModelConfig& config, ParallelGroups& groups);

}  // namespace origami::parallel
