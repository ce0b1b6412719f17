#include "origami/cli/plan_documents.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/core/memory_tracker.h"
#include "origami/data/dataset.h"

namespace origami::cli {

namespace {

constexpr std::uint64_t kLognormalSampleSeed = 2026;  // bench/document_imbalance_bench.cpp's
constexpr std::uint64_t kDataSampleSeed = 1234;       // train's default --seed
constexpr std::int64_t kSampleTokens = std::int64_t{1} << 24;

// The whole of `text` as a finite number, else nullopt.
std::optional<double> whole_number(std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

std::vector<std::vector<std::int32_t>> lognormal_rows(const std::string& spec,
                                                      std::int64_t seq) {
  const std::string args = spec.substr(spec.find(':') + 1);
  const std::size_t comma = args.find(',');
  const std::optional<double> median =
      whole_number(std::string_view(args).substr(0, comma));
  const std::optional<double> sigma =
      comma == std::string::npos ? std::nullopt
                                 : whole_number(std::string_view(args).substr(comma + 1));
  if (!median || !sigma)
    throw ConfigError(fmt::format("--documents '{}': write lognormal:MEDIAN,SIGMA, the median "
                                  "document length in tokens and the log standard deviation "
                                  "(e.g. lognormal:1024,1.2)",
                                  spec));
  if (!(*median > 0))
    throw ConfigError(fmt::format("--documents '{}': the median document length must be > 0 "
                                  "tokens (got {})",
                                  spec, *median));
  if (!(*sigma >= 0))
    throw ConfigError(fmt::format("--documents '{}': sigma, the log standard deviation, must be "
                                  ">= 0 (got {})",
                                  spec, *sigma));
  return plan::lognormal_packed_rows(seq, document_sample_rows(seq), *median, *sigma,
                                     kLognormalSampleSeed);
}

std::vector<std::vector<std::int32_t>> data_rows(const std::string& spec, std::int64_t seq,
                                                 std::int64_t eos_id) {
  data::DataOptions options;
  options.document_masking = true;
  options.eos_id = eos_id;
  try {
    const data::TokenDataset dataset = data::TokenDataset::open(spec, options);
    const std::int64_t n = document_sample_rows(seq);
    MemoryTracker tracker("plan --documents");
    const data::Batch batch = dataset.rows(kDataSampleSeed, 0, n, 0, n, seq, tracker);
    const std::int32_t* ids = batch.documents.data<std::int32_t>();
    std::vector<std::vector<std::int32_t>> rows;
    for (std::int64_t r = 0; r < n; ++r) rows.emplace_back(ids + r * seq, ids + (r + 1) * seq);
    return rows;
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("--documents '{}': {}", spec, e.what()));
  }
}

}  // namespace

std::int64_t document_sample_rows(std::int64_t seq) {
  return std::clamp<std::int64_t>(kSampleTokens / std::max<std::int64_t>(seq, 1), 1, 64);
}

plan::DocumentSample document_sample(const std::string& spec, std::int64_t seq,
                                     parallel::TokenLayoutKind layout, std::int64_t eos_id) {
  if (seq > kSampleTokens)
    throw ConfigError(fmt::format(
        "--documents samples whole rows of --seq tokens, at most {} (2^24) of them; --seq {} "
        "is longer (predict its documents at a shorter --seq, or drop --documents)",
        kSampleTokens, seq));
  plan::DocumentSample s;
  s.source = spec;
  s.layout = layout;
  const bool lognormal = spec.rfind("lognormal:", 0) == 0;
  if (lognormal && eos_id >= 0)
    throw ConfigError(fmt::format("--eos-id {} cuts the documents of a flat .bin given to "
                                  "--documents; '{}' is a length distribution: drop --eos-id",
                                  eos_id, spec));
  s.rows = lognormal ? lognormal_rows(spec, seq) : data_rows(spec, seq, eos_id);
  return s;
}

}  // namespace origami::cli
