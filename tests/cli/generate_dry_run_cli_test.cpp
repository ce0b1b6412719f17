// `origami generate --dry-run` as a user runs it: no checkpoint, the report's JSON carries the
// library's numbers (dryrun/inference.h), the table names both phases, and bad input exits 2
// with a message naming the flag.

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "origami/dryrun/inference.h"
#include "origami/model/config.h"

namespace {

using ::testing::HasSubstr;

using origami::cli_test::CliRun;
using origami::cli_test::origami;
using origami::cli_test::slurp;
using origami::cli_test::temp_base;

TEST(GenerateDryRunCli, JsonIsTheLibrarysReport) {
  const std::string json = temp_base() + ".json";
  const CliRun r = origami(
      "generate --dry-run --model tiny --degree 2 --prompt-tokens 48 --batch 2 "
      "--max-new-tokens 3 --precision bf16 --flops-rate 500 --memory-bw 20 --intra-beta 2e9 "
      "--json " +
      json);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("prefill time"));
  EXPECT_THAT(r.out, HasSubstr("decode time per token"));
  EXPECT_THAT(r.out, HasSubstr("KV cache"));
  const auto j = nlohmann::json::parse(slurp(json));
  ASSERT_EQ(j["prefill"].size(), 2u);
  ASSERT_EQ(j["decode"].size(), 2u);
  EXPECT_EQ(j["decode_steps"].get<std::int64_t>(), 2);

  origami::infer::InferDryRunOptions o;
  o.prompt_tokens = 48;
  o.batch = 2;
  o.new_tokens = 3;
  o.precision = origami::Precision::bf16();
  o.flop_rate = 500e9;
  o.memory_bw = 20e9;
  o.link.intra_beta_Bps = 2e9;
  const origami::infer::InferDryRunReport lib =
      origami::infer::infer_dry_run(origami::model_preset("tiny"), 2, o);
  EXPECT_DOUBLE_EQ(j["prefill_s"].get<double>(), lib.prefill_s);
  EXPECT_DOUBLE_EQ(j["decode_token_s"].get<double>(), lib.decode_token_s);
  for (std::size_t k = 0; k < 2; ++k)
    for (int c = 0; c < origami::kNumMemCategories; ++c) {
      const std::string name(origami::mem_category_name(static_cast<origami::MemCategory>(c)));
      EXPECT_EQ(j["prefill"][k]["peak_bytes"][name].get<std::int64_t>(),
                lib.prefill[k].memory.peak[static_cast<std::size_t>(c)])
          << name;
      EXPECT_EQ(j["decode"][k]["peak_bytes"][name].get<std::int64_t>(),
                lib.decode[k].memory.peak[static_cast<std::size_t>(c)])
          << name;
    }
}

TEST(GenerateDryRunCli, BadInputExitsTwoNamingTheFlag) {
  const struct {
    const char* args;
    const char* says;
  } cases[] = {
      {"generate --dry-run --model tiny --checkpoint somewhere", "needs no checkpoint"},
      {"generate --dry-run --model tiny --temperature 0.5", "greedily"},
      {"generate --dry-run --model tiny --degree 3", "tsp"},
      {"generate --dry-run --model tiny --flops-rate 0", "--flops-rate"},
      {"generate --dry-run --model tiny --memory-bw -1", "--memory-bw"},
      {"generate --dry-run --model tiny --prompt-tokens 0", "--prompt-tokens"},
      {"generate --dry-run --model tiny --precision fp8", "fp8"},
      {"generate --dry-run --model tiny --layout balanced", "a prompt is one causal sequence"},
      {"generate --dry-run", "--model"},
      {"generate --checkpoint x --prompt a --flops-rate 5", "--flops-rate belongs to --dry-run"},
  };
  for (const auto& c : cases) {
    const CliRun r = origami(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.says)) << c.args;
  }
}

// Degrees above the kv heads: a multiple of them runs (tiny: 2 kv heads, degree 4); a degree
// neither dividing them nor a multiple of them (12 heads over 4 kv heads, degree 6) is refused,
// naming the largest degree that works.
TEST(GenerateDryRunCli, ReplicatesKvHeadsAtAMultipleAndRefusesANonMultiple) {
  const CliRun ok = origami("generate --dry-run --model tiny --degree 4 --prompt-tokens 16");
  EXPECT_EQ(ok.code, 0) << ok.all();
  EXPECT_THAT(ok.out, HasSubstr("tsp=4"));
  const std::string config = temp_base() + ".json";
  std::ofstream(config) << R"({"vocab_size": 97, "hidden_size": 96, "intermediate_size": 96,
    "num_hidden_layers": 1, "num_attention_heads": 12, "num_key_value_heads": 4,
    "max_position_embeddings": 64})";
  const CliRun r = origami("generate --dry-run --config " + config + " --degree 6");
  std::filesystem::remove(config);
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("or be a multiple of it"));
  EXPECT_THAT(r.err, HasSubstr("the largest degree that works is 4"));
}

}  // namespace
