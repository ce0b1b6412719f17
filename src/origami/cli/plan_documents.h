// `origami plan --documents SPEC`: the sample of packed rows the planner predicts document
// masking from (plan/document_imbalance.h), drawn from a length distribution or from the
// user's own token files (docs/planner.md, "Packed documents").
#pragma once

#include <cstdint>
#include <string>

#include "origami/parallel/layout.h"
#include "origami/plan/document_imbalance.h"

namespace origami::cli {

// Rows the sample holds: 64, fewer when S is so long that 64 rows would exceed 2^24 tokens.
std::int64_t document_sample_rows(std::int64_t seq);

// SPEC is `lognormal:MEDIAN,SIGMA` (document lengths log-normal around MEDIAN tokens, > 0, with
// log standard deviation SIGMA >= 0, clamped to [16, S], packed back to back, seed 2026) or a
// --data spec whose every source has a document index (an Origami token file or a Megatron
// prefix; a blend too): its first rows of S tokens in the random order at train's default seed
// 1234, cut at the documents as `train --document-masking` cuts them; with eos_id >= 0 a flat
// or llm.c .bin's documents end after each token of that id, as `train --eos-id` reads them.
// ConfigError naming --documents otherwise.
plan::DocumentSample document_sample(const std::string& spec, std::int64_t seq,
                                     parallel::TokenLayoutKind layout, std::int64_t eos_id = -1);

}  // namespace origami::cli
