// The balanced token layout (--layout balanced): chunks assigned to ranks by their
// document-masked causal attention work.
//
// With packed documents a query's work is the keys of its own document at or before it, so
// zigzag's fold (equal work for ONE document per row) no longer balances the ranks (figures:
// docs/data.md "Balancing the ranks"). The balanced layout splits the S positions into
// C = 2D*k equal chunks (k = 4, 2 or 1: the largest with S % C == 0), counts each chunk's
// visible pairs over every row of the micro-batch, and gives each rank C/D chunks (so S/D
// tokens) by greedy largest-first then pairwise swaps that lower the busiest rank. The assignment is a pure function of the micro-batch's document ids,
// computed identically on every rank from the whole rows it already holds (nothing is sent);
// a rank's chunks are concatenated in ascending position order.
#pragma once

#include <cstdint>
#include <vector>

#include "origami/parallel/parallel_config.h"

namespace origami::parallel {

// Refuses (ConfigError) --layout balanced where it cannot apply: a plan that does not split
// the tokens (no sp or tsp axis), or rows without packed documents (then zigzag already
// balances the one causal sequence). The sequence length is checked by check_token_split.
void check_balanced_layout(const ParallelConfig& plan, bool document_masking);

// C for S positions over `degree` ranks: 2D*k with k the largest of 4, 2, 1 dividing S/(2D).
// Needs S % 2D == 0 (checked by check_token_split).
std::int64_t balanced_chunk_count(std::int64_t seq, int degree);

// Visible (query, key) pairs of each of `chunks` equal chunks of the query positions, summed
// over `batch` rows of document ids ([batch, seq], each document one contiguous run, as
// packing gives them; nullptr: one document per row). A query at offset i of its document's
// run sees i + 1 keys.
std::vector<double> chunk_attention_work(const std::int32_t* documents, std::int64_t batch,
                                         std::int64_t seq, std::int64_t chunks);

// The chunks of every rank, rank after rank (each rank's C/D chunks in ascending order), that
// minimise the busiest rank's summed work heuristically: greedy largest-first onto the
// least-loaded rank with room (ties: the lower chunk, the lower rank), then swaps of one chunk
// between the busiest rank and another while that lowers the larger of the two. Deterministic.
std::vector<std::int64_t> assign_balanced_chunks(const std::vector<double>& work, int degree);

}  // namespace origami::parallel
