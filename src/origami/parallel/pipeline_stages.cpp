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

std::vector<std::int64_t> balanced_stage_layers(std::int64_t layers, int chunks) {
  ORIGAMI_CHECK(chunks >= 1 && chunks <= layers, "{} chunks over {} layers", chunks, layers);
  std::vector<std::int64_t> out(static_cast<std::size_t>(chunks), layers / chunks);
  std::int64_t extra = layers % chunks;
  for (int c = 1; c + 1 < chunks && extra > 0; ++c, --extra) ++out[static_cast<std::size_t>(c)];
  if (extra > 0) ++out[0];  // every interior chunk has one: the embedding's chunk before the head's
  return out;
}

const StageLayers& PipelineSplit::layers_of(int rank, int local) const {
  ORIGAMI_CHECK(rank >= 0 && rank < stages && local >= 0 && local < virtual_stages,
                "chunk {} of rank {} in a pipeline of {} ranks x {} chunks", local, rank, stages,
                virtual_stages);
  return chunks[static_cast<std::size_t>(chunk_of(rank, local))];
}

int PipelineSplit::chunk_of_layer(std::int64_t layer) const {
  for (std::size_t c = 0; c < chunks.size(); ++c)
    if (layer >= chunks[c].first && layer < chunks[c].first + chunks[c].count)
      return static_cast<int>(c);
  ORIGAMI_CHECK(false, "layer {}, which no pipeline chunk holds", layer);
  return -1;
}

void check_pipeline_split(const ParallelConfig& p, std::int64_t layers) {
  if (p.pp_virtual < 1)
    throw ConfigError(fmt::format("--pp-virtual {}: each pipeline rank holds at least one model "
                                  "chunk; use --pp-virtual 1 (plain 1F1B) or more",
                                  p.pp_virtual));
  if (p.pp_virtual > 1 && p.pp == 1)
    throw ConfigError(fmt::format("--pp-virtual {} without pipeline stages: interleaving needs "
                                  "pp=2 or more in --mesh (e.g. --mesh pp=2,tsp=2), or drop "
                                  "--pp-virtual",
                                  p.pp_virtual));
  const std::int64_t chunks = std::int64_t{p.pp} * p.pp_virtual;
  if (chunks > layers) {
    if (p.pp_virtual == 1)
      throw ConfigError(fmt::format("pp={} pipeline stages over a model of {} layers: every "
                                    "stage needs at least one layer; use pp={} or fewer",
                                    p.pp, layers, layers));
    throw ConfigError(fmt::format("pp={} x --pp-virtual {} = {} model chunks over a model of {} "
                                  "layers: every chunk needs at least one layer; use "
                                  "--pp-virtual {} or less (or fewer stages)",
                                  p.pp, p.pp_virtual, chunks, layers,
                                  std::max<std::int64_t>(1, layers / p.pp)));
  }
  if (p.pp_layers.empty()) return;
  const std::string unit = p.pp_virtual > 1 ? "chunk" : "stage";
  for (std::size_t s = 0; s < p.pp_layers.size(); ++s)
    if (p.pp_layers[s] < 1)
      throw ConfigError(fmt::format("--pp-layers {}: {} {} has {} layers; every {} needs at "
                                    "least one",
                                    fmt::join(p.pp_layers, ","), unit, s, p.pp_layers[s], unit));
  const int n = static_cast<int>(chunks);
  const std::string example = fmt::format("{}", fmt::join(balanced_stage_layers(layers, n), ","));
  if (std::ssize(p.pp_layers) != chunks) {
    if (p.pp_virtual == 1)
      throw ConfigError(fmt::format("--pp-layers {} gives {} stages but the mesh has pp={}; give "
                                    "one count per stage (e.g. --pp-layers {})",
                                    fmt::join(p.pp_layers, ","), p.pp_layers.size(), p.pp,
                                    example));
    throw ConfigError(fmt::format("--pp-layers {} gives {} chunks but pp={} x --pp-virtual {} "
                                  "has {}; give one count per chunk, first to last (chunk c on "
                                  "pp rank c mod {}; e.g. --pp-layers {})",
                                  fmt::join(p.pp_layers, ","), p.pp_layers.size(), p.pp,
                                  p.pp_virtual, chunks, p.pp, example));
  }
  const std::int64_t sum = std::accumulate(p.pp_layers.begin(), p.pp_layers.end(), std::int64_t{0});
  if (sum != layers)
    throw ConfigError(fmt::format("--pp-layers {} sums to {} layers but the model has {}; make "
                                  "the counts sum to {} (e.g. --pp-layers {})",
                                  fmt::join(p.pp_layers, ","), sum, layers, layers, example));
}

PipelineSplit stage_layers(const ParallelConfig& p, std::int64_t layers) {
  check_pipeline_split(p, layers);
  PipelineSplit split{.stages = p.pp, .virtual_stages = p.pp_virtual, .chunks = {}};
  const std::vector<std::int64_t> counts =
      p.pp_layers.empty() ? balanced_stage_layers(layers, split.chunk_count()) : p.pp_layers;
  std::int64_t first = 0;
  for (const std::int64_t n : counts) {
    split.chunks.push_back({first, n});
    first += n;
  }
  return split;
}

int stage_of_tensor(const std::string& name, const PipelineSplit& split) {
  const std::string layer_prefix = "model.layers.";
  if (name.rfind(layer_prefix, 0) != 0)
    return name == "model.embed_tokens.weight" ? split.rank_of_chunk(0)
                                               : split.rank_of_chunk(split.chunk_count() - 1);
  return split.rank_of_chunk(split.chunk_of_layer(std::stoll(name.substr(layer_prefix.size()))));
}

void check_pipeline_model(const ParallelConfig& p, const ModelConfig& model) {
  check_pipeline_split(p, model.num_hidden_layers);
  if (p.pp > 1 && model.tie_word_embeddings)
    throw ConfigError(fmt::format(
        "pp={} with tie_word_embeddings: the tied table would be needed on the first stage "
        "(embedding) and on the last (LM head), and pipeline stages do not share it yet; set "
        "tie_word_embeddings false in the model config, or drop pp from --mesh",
        p.pp));
}

}  // namespace origami::parallel
