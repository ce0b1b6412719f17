// Token files from the command line: `origami tokenize --input --out` with a real tokenizer.json
// (a small byte-level BPE written here, with an eos), then `origami train --data` on the file,
// on a blend and on an llm.c file; the larger vocabulary, a corrupted file and bad flags exit 2
// naming the problem.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "origami/tokenizer/byte_level.h"

namespace {

using ::testing::HasSubstr;
using origami::cli_test::CliRun;
using origami::cli_test::origami;
using json = nlohmann::json;

class TokenDataCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "origami_tokdata_cli_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_ + "/tok");
    // 256 byte tokens, merges spelling "the", and the special <|end|> (259) as eos: 260 ids.
    json vocab = json::object();
    for (int b = 0; b < 256; ++b)
      vocab[origami::tokenizer::byte_level::from_bytes(std::string(1, static_cast<char>(b)))] = b;
    vocab["th"] = 256;
    vocab["the"] = 257;
    vocab["zz"] = 258;
    const json tok = {
        {"version", "1.0"},
        {"added_tokens", json::array({{{"id", 259}, {"content", "<|end|>"}, {"special", true},
                                       {"normalized", false}}})},
        {"normalizer", nullptr},
        {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
        {"post_processor", nullptr},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"t h", "th e", "z z"})}}}};
    std::ofstream(dir_ + "/tok/tokenizer.json") << tok.dump();
    std::ofstream(dir_ + "/tok/tokenizer_config.json") << json{{"eos_token", "<|end|>"}}.dump();
    std::ofstream corpus(dir_ + "/corpus.jsonl");
    for (int i = 0; i < 40; ++i)
      corpus << json{{"text", "the cat " + std::to_string(i) + " sat on the mat."}}.dump() << "\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string config(int vocab) {
    const json j = {{"vocab_size", vocab},        {"hidden_size", 32},
                    {"intermediate_size", 48},    {"num_hidden_layers", 1},
                    {"num_attention_heads", 4},   {"num_key_value_heads", 2},
                    {"rms_norm_eps", 1e-5},       {"rope_theta", 10000.0},
                    {"max_position_embeddings", 64}};
    const std::string path = dir_ + "/config" + std::to_string(vocab) + ".json";
    std::ofstream(path) << j.dump();
    return path;
  }
  std::string tokenize_corpus() {
    const CliRun r = origami("tokenize --tokenizer " + dir_ + "/tok --input " + dir_ +
                             "/corpus.jsonl --out " + dir_ + "/corpus");
    EXPECT_EQ(r.code, 0) << r.all();
    return r.out;
  }
  std::string dir_;
};

TEST_F(TokenDataCli, TokenizeThenTrainOnTheTokenFile) {
  const std::string said = tokenize_corpus();
  EXPECT_THAT(said, HasSubstr("tokenize: 40 documents (0 empty, skipped)"));
  EXPECT_THAT(said, HasSubstr("of uint16"));
  EXPECT_THAT(said, HasSubstr("MB/s"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/corpus.tokens"));
  // The eos (259) ends every document: 40 of them among the uint16 ids.
  std::ifstream tokens(dir_ + "/corpus.tokens", std::ios::binary);
  int eos = 0;
  for (std::uint16_t id = 0; tokens.read(reinterpret_cast<char*>(&id), 2);) eos += id == 259;
  EXPECT_EQ(eos, 40);
  const std::string metrics = dir_ + "/metrics.jsonl";
  const CliRun r = origami("train --config " + config(260) + " --data " + dir_ +
                           "/corpus --seq 16 --batch 2 --steps 3 --log-every 1 --threads 1 "
                           "--strategy single --metrics " + metrics);
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("data wait"));
  EXPECT_THAT(r.out, HasSubstr("data: " + dir_ + "/corpus (Origami token file (uint16), "));
  EXPECT_THAT(r.out, HasSubstr(", 40 documents), random order"));
  std::ifstream in(metrics);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    EXPECT_GE(json::parse(line).at("data_wait_s").get<double>(), 0.0);
    ++lines;
  }
  EXPECT_EQ(lines, 3);
  // Under a parallel strategy too, with a blend of the token file and a text file.
  std::ofstream(dir_ + "/text.txt") << std::string(200, 'a');
  const CliRun p = origami("train --config " + config(260) + " --data " + dir_ + "/corpus:0.5," +
                           dir_ + "/text.txt:0.5 --seq 16 --batch 2 --steps 2 --threads 2 "
                           "--strategy tsp --degree 2");
  ASSERT_EQ(p.code, 0) << p.all();
  EXPECT_THAT(p.out, HasSubstr("40 documents, weight 0.5) + "));
}

TEST_F(TokenDataCli, LargerVocabularyAndCorruptedFilesExitTwo) {
  tokenize_corpus();
  CliRun r = origami("train --model tiny --data " + dir_ + "/corpus --seq 16 --steps 1");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("vocabulary of 260"));
  EXPECT_THAT(r.err, HasSubstr("vocab_size is 256"));
  // The token file cut by one byte: named, with the offset.
  std::filesystem::resize_file(dir_ + "/corpus.tokens",
                               std::filesystem::file_size(dir_ + "/corpus.tokens") - 1);
  r = origami("train --config " + config(260) + " --data " + dir_ + "/corpus --seq 16 --steps 1");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("token file '" + dir_ + "/corpus.tokens', byte offset"));
  r = origami("train --model tiny --data x.bin --data-dtype int8 --steps 1");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("--data-dtype 'int8'"));
}

// --document-masking: packed rows on one device, under dp, under TSP (zigzag) and under SP
// with the balanced layout print the same losses; data without a document index is refused (exit 2, naming the file).
TEST_F(TokenDataCli, DocumentMaskingTrainsOrIsRefusedUpFront) {
  tokenize_corpus();
  const std::string base = "train --config " + config(260) + " --data " + dir_ +
                           "/corpus --seq 32 --batch 2 --steps 2 --threads 2 --document-masking ";
  const CliRun one = origami(base + "--strategy single");
  ASSERT_EQ(one.code, 0) << one.all();
  EXPECT_THAT(one.out, HasSubstr("random order, packed documents masked"));
  // The first step's loss, as printed (4 decimals): the same on every strategy.
  auto first_loss = [](const std::string& out) {
    const std::size_t at = out.find("step     1  loss ");
    return at == std::string::npos ? std::string("none") : out.substr(at + 17, 6);
  };
  // --batch is per data-parallel replica: dp 2 at 1 each reads the one device's 2 rows.
  std::string per_replica = base;
  per_replica.replace(per_replica.find("--batch 2"), 9, "--batch 1");
  for (const std::string strategy : {"--strategy dp --degree 2", "--strategy tsp --degree 2",
                                     "--strategy sp --degree 2 --layout balanced"}) {
    const CliRun r = origami((strategy.find("dp") != std::string::npos ? per_replica : base) + strategy);
    ASSERT_EQ(r.code, 0) << r.all();
    EXPECT_EQ(first_loss(r.out), first_loss(one.out)) << strategy;
  }
  // Without masking the same data gives another loss (attention crosses the documents).
  const CliRun unmasked = origami("train --config " + config(260) + " --data " + dir_ +
                                  "/corpus --seq 32 --batch 2 --steps 2 --threads 2 "
                                  "--strategy single");
  ASSERT_EQ(unmasked.code, 0) << unmasked.all();
  EXPECT_NE(first_loss(unmasked.out), first_loss(one.out));
  CliRun r = one;
  std::ofstream(dir_ + "/text.txt") << std::string(200, 'a');
  r = origami("train --model tiny --data " + dir_ + "/text.txt --seq 16 --steps 1 "
              "--strategy single --document-masking");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("has no document index"));
}

// --eos-id: the token file's .tokens is a flat uint16 file whose documents each end with the
// eos (259); trained with --eos-id 259 it prints the token file's losses; a checkpoint keeps the id (a resume without it is refused; with it, the resumed
// step equals the uninterrupted run's).
TEST_F(TokenDataCli, EosIdTrainsAFlatFileAsItsTokenFile) {
  tokenize_corpus();
  std::filesystem::copy_file(dir_ + "/corpus.tokens", dir_ + "/flat.bin");
  const std::string job = "train --config " + config(260) + " --seq 32 --batch 2 --steps 3 "
                          "--log-every 1 --threads 2 --document-masking ";
  // (The batches are the token file's, token for token: DocumentMasking.EosIdCutsAFlatFile...;
  // every strategy takes the same batches, so one device stands for them.)
  const CliRun indexed = origami(job + "--strategy single --data " + dir_ + "/corpus");
  const CliRun flat = origami(job + "--strategy single --data " + dir_ + "/flat.bin --eos-id 259");
  ASSERT_EQ(indexed.code, 0) << indexed.all();
  ASSERT_EQ(flat.code, 0) << flat.all();
  EXPECT_THAT(flat.out, HasSubstr("flat uint16, documents end at eos 259"));
  EXPECT_THAT(flat.out, HasSubstr("40 documents"));
  ASSERT_EQ(origami::cli_test::losses(flat.out).size(), 3u);
  EXPECT_EQ(origami::cli_test::losses(flat.out), origami::cli_test::losses(indexed.out));
  const std::string save = job + "--strategy single --data " + dir_ + "/flat.bin --save-every 2 "
                           "--save-dir " + dir_ + "/ckpt";
  const CliRun whole = origami(save + " --eos-id 259");
  ASSERT_EQ(whole.code, 0) << whole.all();
  std::filesystem::remove_all(dir_ + "/ckpt/step-00000003");  // resume from step 2
  CliRun r = origami(save + " --eos-id 257");  // "the", which ends no document
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("saved with --eos-id 259, this run has --eos-id 257"));
  r = origami(save + " --eos-id 259");
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("resumed from"));
  const std::vector<std::string> resumed = origami::cli_test::losses(r.out);
  ASSERT_EQ(resumed.size(), 1u) << r.out;
  EXPECT_EQ(resumed[0], origami::cli_test::losses(whole.out).back());
  // Without --document-masking, or with an id outside the vocabulary: exit 2.
  r = origami("train --config " + config(260) + " --data " + dir_ + "/flat.bin --eos-id 259 "
              "--seq 16 --steps 1");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("add --document-masking or drop --eos-id"));
  r = origami(job + "--data " + dir_ + "/flat.bin --eos-id 260");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("outside the model's vocabulary of 260 ids"));
}

// `train --dry-run --document-masking --data`: the dry run reads the run's rows and charges
// their masked attention, less than the same dry run's full causal rows (exit 0 both).
TEST_F(TokenDataCli, DryRunChargesTheMaskedAttentionOfTheRows) {
  tokenize_corpus();
  const std::string job = "train --dry-run --config " + config(260) + " --seq 64 --strategy sp "
                          "--degree 2 ";
  const CliRun masked = origami(job + "--document-masking --data " + dir_ + "/corpus");
  const CliRun causal = origami(job);
  ASSERT_EQ(masked.code, 0) << masked.all();
  ASSERT_EQ(causal.code, 0) << causal.all();
  EXPECT_THAT(masked.out, HasSubstr("dry run: rows of " + dir_ + "/corpus (Origami token file"));
  // Rank 0's attention TFLOP, as the summary prints it: "(X attention)".
  const auto attention = [](const std::string& out) {
    const std::size_t at = out.find("\n0     step ");
    const std::size_t open = out.find('(', at), end = out.find(" attention)", at);
    return at == std::string::npos || end == std::string::npos
               ? -1.0
               : std::stod(out.substr(open + 1, end - open - 1));
  };
  EXPECT_GT(attention(masked.out), 0.0) << masked.out;
  EXPECT_LT(attention(masked.out), 0.5 * attention(causal.out)) << causal.out;
}

// Under mpirun every process maps the files itself and reads its rows: the printed losses are
// the single device's (as tests/cli/parallel_cli_test.cpp compares them).
TEST_F(TokenDataCli, DataParallelUnderMpirunEqualsOneDevice) {
  tokenize_corpus();
  std::ofstream(dir_ + "/text.txt") << std::string(300, 'b') + "the end";
  const std::string job = "train --config " + config(260) + " --data " + dir_ + "/corpus:2," +
                          dir_ + "/text.txt:1 --data-order epoch --seq 16 --steps 3 "
                          "--log-every 1 --threads 1 ";
  const CliRun single = origami(job + "--batch 4 --strategy single");
  ASSERT_EQ(single.code, 0) << single.all();
  // --batch is each replica's micro-batch: 2 on each of dp 2 are the one device's 4.
  const CliRun r = origami(job + "--batch 2 --strategy dp --degree 2",
                           "ASAN_OPTIONS=detect_leaks=0 " + std::string(ORIGAMI_BINARY_DIR) +
                               "/tests/comm/origami_mpirun 2 ");
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_THAT(r.all(), HasSubstr("on 2 ranks (mpi)"));
  EXPECT_THAT(r.all(), HasSubstr("epoch order"));
  ASSERT_EQ(origami::cli_test::losses(single.all()).size(), 3u);
  EXPECT_EQ(origami::cli_test::losses(r.all()), origami::cli_test::losses(single.all()));
}

TEST_F(TokenDataCli, TrainsOnAnLlmcFile) {
  std::ofstream out(dir_ + "/train.bin", std::ios::binary);
  std::int32_t header[256] = {20240520, 1, 300};
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  for (int i = 0; i < 300; ++i) {
    const auto id = static_cast<std::uint16_t>((i * 31) % 256);
    out.write(reinterpret_cast<const char*>(&id), 2);
  }
  out.close();
  const CliRun r = origami("train --model tiny --data " + dir_ + "/train.bin --seq 16 --batch 2 "
                           "--steps 2 --threads 1 --strategy single");
  EXPECT_EQ(r.code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("train.bin (llm.c .bin (uint16), 300 tokens), random order"));
}

TEST_F(TokenDataCli, TokenizeFlagsAreCheckedTogether) {
  CliRun r = origami("tokenize --input " + dir_ + "/corpus.jsonl");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--input FILE and --out PREFIX go together"));
  r = origami("tokenize --print --input " + dir_ + "/corpus.jsonl --out " + dir_ + "/x");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("give one of --print"));
  r = origami("tokenize --input " + dir_ + "/missing.jsonl --out " + dir_ + "/x");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot open '" + dir_ + "/missing.jsonl'"));
  std::ofstream(dir_ + "/bad.jsonl") << "{\"text\": \"ok\"}\nnot json\n";
  r = origami("tokenize --input " + dir_ + "/bad.jsonl --out " + dir_ + "/x");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("line 2 (byte offset 15): not JSON"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/x.index"));
}

}  // namespace
