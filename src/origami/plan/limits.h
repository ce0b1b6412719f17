// The sizes the planner can count. Its byte counts are int64; a sequence of 2^62 tokens or a
// micro-batch of 2^63 - 1 sequences overflowed them into negative GiB that "fit". The bound
// here is checked in floating point before any int64 product is formed.
#pragma once

#include "origami/model/config.h"
#include "origami/plan/cost_model.h"

namespace origami::plan {

// Bytes above which a job is refused outright (2^60 B = 1 EiB per device: beyond any machine,
// and far enough below 2^63 that no intermediate product of the planner overflows).
inline constexpr double kMaxCountedBytes = 0x1p60;

// An upper estimate, in floating point, of the largest byte count the planner forms for this
// model and workload on one device (the whole job, as if undivided).
double approximate_job_bytes(const ModelConfig& m, const Workload& w);

// Throws ConfigError naming --seq, --batch and the model when approximate_job_bytes exceeds
// kMaxCountedBytes.
void check_countable(const ModelConfig& m, const Workload& w);

}  // namespace origami::plan
