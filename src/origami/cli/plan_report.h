// `origami plan`'s two outputs of the same rows: the table and the JSON document (the issue's
// naming: strategy single/dp/tp/sp/tpsp/tsp, sequence_parallel, mesh {dp, tp, sp, tsp},
// per-category and total bytes).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "origami/core/precision.h"
#include "origami/model/config.h"
#include "origami/plan/hardware.h"
#include "origami/plan/document_imbalance.h"
#include "origami/plan/inference.h"
#include "origami/plan/layouts.h"

namespace origami::cli {

struct PlanReport {
  std::string source;  // the preset's name or the config file's path
  ModelConfig model;
  std::int64_t seq = 0, batch = 0, grad_accum = 1;
  int world = 0;
  Precision precision;
  std::string recompute;
  plan::Hardware hw;
  std::vector<plan::PlanRow> rows;  // sorted, the recommendation first
  // Per strategy family: the longest sequence any of its layouts fits, and that layout.
  std::map<std::string, std::pair<std::int64_t, plan::Layout>> longest;
  std::vector<plan::InferenceRow> inference;
  std::vector<std::string> inference_errors;
  std::int64_t global_batch = 0;  // > 0: fixed instead of the micro-batch (per row: Prediction)
  std::string advice;  // when no layout runs or fits: what to change (else empty)
  std::shared_ptr<const plan::DocumentSample> documents;  // --documents (else null)
  bool shard_optimizer = false;  // --shard-optimizer: optim is each dp rank's 1/dp slice
};

// A layout's strategy family, "pp x " in front under pipeline stages ("pp" alone for stages
// of one device): the key of the longest-sequence list.
std::string family_label(const plan::Layout& l);
nlohmann::json plan_json(const PlanReport& p);
void print_plan_table(std::ostream& out, const PlanReport& p);

}  // namespace origami::cli
