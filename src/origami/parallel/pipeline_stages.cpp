#include "origami/parallel/pipeline_stages.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "origami/core/error.h"

namespace origami::parallel {

std::vector<std::int64_t> parse_pp_layers(const std::string& text) {
  std::vector<std::int64_t> out;
  if (text.empty()) return out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    // Digits only (stoll would take "+3" and " 3"); a stage of more than 2^20 layers is a typo.
    const bool digits = !item.empty() && item.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || used != item.size() || v < 1 || v > (1 << 20))
      throw ConfigError(fmt::format("--pp-layers '{}': item {} ('{}') is not a positive number "
                                    "of layers; write the layers of each stage, first to last, "
                                    "e.g. --pp-layers 3,5",
                                    text, out.size() + 1, item));
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

std::vector<std::int64_t> balanced_stage_layers(std::int64_t layers, int stages) {
  ORIGAMI_CHECK(stages >= 1 && stages <= layers, "{} stages over {} layers", stages, layers);
  std::vector<std::int64_t> out(static_cast<std::size_t>(stages), layers / stages);
  std::int64_t extra = layers % stages;
  for (int s = 1; s + 1 < stages && extra > 0; ++s, --extra) ++out[static_cast<std::size_t>(s)];
  if (extra > 0) ++out[0];  // every interior stage has one: the embedding's stage before the head's
  return out;
}

void check_pipeline_split(const ParallelConfig& p, std::int64_t layers) {
  if (p.pp > layers)
    throw ConfigError(fmt::format("pp={} pipeline stages over a model of {} layers: every stage "
                                  "needs at least one layer; use pp={} or fewer",
                                  p.pp, layers, layers));
  if (p.pp_layers.empty()) return;
  for (std::size_t s = 0; s < p.pp_layers.size(); ++s)
    if (p.pp_layers[s] < 1)
      throw ConfigError(fmt::format("--pp-layers {}: stage {} has {} layers; every stage needs "
                                    "at least one",
                                    fmt::join(p.pp_layers, ","), s, p.pp_layers[s]));
  if (std::ssize(p.pp_layers) != p.pp)
    throw ConfigError(fmt::format("--pp-layers {} gives {} stages but the mesh has pp={}; give "
                                  "one count per stage (e.g. --pp-layers {})",
                                  fmt::join(p.pp_layers, ","), p.pp_layers.size(), p.pp,
                                  fmt::join(balanced_stage_layers(layers, p.pp), ",")));
  const std::int64_t sum = std::accumulate(p.pp_layers.begin(), p.pp_layers.end(), std::int64_t{0});
  if (sum != layers)
    throw ConfigError(fmt::format("--pp-layers {} sums to {} layers but the model has {}; make "
                                  "the counts sum to {} (e.g. --pp-layers {})",
                                  fmt::join(p.pp_layers, ","), sum, layers, layers,
                                  fmt::join(balanced_stage_layers(layers, p.pp), ",")));
}

std::vector<StageLayers> stage_layers(const ParallelConfig& p, std::int64_t layers) {
  check_pipeline_split(p, layers);
  const std::vector<std::int64_t> counts =
      p.pp_layers.empty() ? balanced_stage_layers(layers, p.pp) : p.pp_layers;
  std::vector<StageLayers> out;
  std::int64_t first = 0;
  for (const std::int64_t n : counts) {
    out.push_back({first, n});
    first += n;
  }
  return out;
}

int stage_of_tensor(const std::string& name, const std::vector<StageLayers>& stages) {
  const std::string layer_prefix = "model.layers.";
  if (name.rfind(layer_prefix, 0) != 0)
    return name == "model.embed_tokens.weight" ? 0 : static_cast<int>(stages.size()) - 1;
  const std::int64_t l = std::stoll(name.substr(layer_prefix.size()));
  for (std::size_t s = 0; s < stages.size(); ++s)
    if (l >= stages[s].first && l < stages[s].first + stages[s].count) return static_cast<int>(s);
  ORIGAMI_CHECK(false, "tensor {} of a layer no stage holds", name);
  return -1;
}

void check_pipeline_model(const ParallelConfig& p, const ModelConfig& model) {
  check_pipeline_split(p, model.num_hidden_layers);
  if (p.pp > 1 && model.tie_word_embeddings)
    throw ConfigError(fmt::format(
        "pp={} with tie_word_embeddings: the tied table would be needed on the first stage "
        "(embedding) and on the last (LM head), and pipeline stages do not share it yet; set "
        "tie_word_embeddings false in the model config, or drop pp from --mesh",
        p.pp));
  if (p.pp > 1 && model.is_moe())
    throw ConfigError(fmt::format(
        "pp={} with num_local_experts {}: mixture-of-experts layers do not run in pipeline "
        "stages yet (their auxiliary loss is not carried between stages); drop pp from --mesh "
        "and train it under --strategy tsp (docs/moe.md)",
        p.pp, model.num_local_experts));
}

}  // namespace origami::parallel
