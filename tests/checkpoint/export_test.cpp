// `origami export` writes one Hugging Face model.safetensors + config.json from a checkpoint
// of any layout; the PyTorch oracle (float64, independent) loads it and computes the loss the
// run computed next; `--init-from` starts a run from such a folder (or from a checkpoint).
#include <sys/wait.h>

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "../oracle/oracle_util.h"
#include "ckpt_util.h"
#include "origami/data/dataset.h"

namespace origami::ckpt_test {
namespace {

namespace fs = std::filesystem;

int run_cli(const std::string& args, const std::string& log) {
  const std::string cmd =
      std::string(ORIGAMI_BINARY_DIR) + "/origami " + args + " > " + log + " 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The oracle's loss on the run's batch `index` (the dataset's batch of that step) for the
// folder exported to d/hf, into *loss.
void oracle_loss_of_batch(const std::string& d, const TrainOptions& o, std::int64_t index,
                          double* loss) {
  const data::TokenDataset ds = data::TokenDataset::default_corpus();
  MemoryTracker tracker("export test");
  const data::Batch b = ds.batch(o.seed, index, o.batch, o.seq, tracker);
  oracle::write_batch(d + "/batch.safetensors", o.batch, o.seq, b.input_ids.data<std::int32_t>(),
                      b.labels.data<std::int32_t>());
  oracle::OracleRun run;
  run.config = d + "/hf/config.json";
  run.weights = d + "/hf/model.safetensors";
  run.batches = {d + "/batch.safetensors"};
  run.out = d + "/oracle.safetensors";
  ASSERT_NO_FATAL_FAILURE(oracle::run_oracle(run));
  *loss = io::SafetensorsFile::open(run.out).read_as_f64("loss").at(0);
}

TEST(Export, OracleComputesTheSameLossAndInitFromStartsThere) {
  const std::string d = fresh_dir("export");
  // TP 2 for 4 steps, one micro-batch a step (the oracle's loss is one batch's); saved at 3.
  TrainOptions o = tiny_options({"tp", 2, ""}, 4);
  o.grad_accum = 1;
  o.checkpoint.save_dir = d + "/run";
  o.checkpoint.save_every = 3;
  const TrainResult ra = quiet_train(o);
  ASSERT_EQ(ra.steps.size(), 4u);
  const std::string c = ckpt::checkpoint_dir(d + "/run", 3);
  ASSERT_EQ(run_cli("export --checkpoint " + c + " --out " + d + "/hf", d + "/log"), 0);

  // The file is the Hugging Face layout: exactly the Llama names and global shapes.
  const io::SafetensorsFile f = io::SafetensorsFile::open(d + "/hf/model.safetensors");
  const auto want = oracle::hf_parameter_shapes(tiny_model());
  ASSERT_EQ(f.tensors().size(), want.size());
  for (const auto& [name, shape] : want) {
    ASSERT_TRUE(f.contains(name)) << name;
    EXPECT_EQ(f.entry(name).shape, shape) << name;
  }

  // The oracle's loss on step 4's batch (batch index 3) equals the run's step-4 loss.
  double oracle_loss = 0;
  ASSERT_NO_FATAL_FAILURE(oracle_loss_of_batch(d, o, 3, &oracle_loss));
  EXPECT_NEAR(ra.steps[3].loss, oracle_loss, 1e-5 * oracle_loss);

  // --init-from the exported folder and from the checkpoint itself: the same parameters,
  // hence the same first loss (on batch 0), equal to the oracle's; a fresh run's differs.
  TrainOptions i = tiny_options({"single", 1, ""}, 1);
  i.grad_accum = 1;
  i.checkpoint.init_from = d + "/hf";
  const double from_hf = quiet_train(i).steps.at(0).loss;
  i.checkpoint.init_from = c;
  const double from_ckpt = quiet_train(i).steps.at(0).loss;
  EXPECT_EQ(from_hf, from_ckpt);
  i.checkpoint.init_from.clear();
  const double fresh = quiet_train(i).steps.at(0).loss;
  EXPECT_GT(std::abs(fresh - from_hf), 1e-3);
  double oracle0 = 0;
  ASSERT_NO_FATAL_FAILURE(oracle_loss_of_batch(d, o, 0, &oracle0));
  EXPECT_NEAR(from_hf, oracle0, 1e-5 * oracle0);
  // --init-from under TP 2 reads the same folder by blocks.
  i = tiny_options({"tp", 2, ""}, 1);
  i.grad_accum = 1;
  i.checkpoint.init_from = d + "/hf";
  EXPECT_NEAR(quiet_train(i).steps.at(0).loss, from_hf, 2e-5 * from_hf);
  fs::remove_all(d);
}

// Tied embeddings: the checkpoint holds the shared table once (no lm_head, no head moments),
// the export writes it as model.embed_tokens.weight with tie_word_embeddings true and no
// lm_head.weight, the oracle (tied: one leaf used twice) computes the run's next loss from it,
// and --init-from reads it under another layout.
TEST(Export, TiedTableIsStoredOnceAndExportedAsTheEmbedding) {
  const std::string d = fresh_dir("export_tied");
  TrainOptions o = tiny_options({"tsp", 2, ""}, 4);
  o.model.tie_word_embeddings = true;
  o.grad_accum = 1;
  o.checkpoint.save_dir = d + "/run";
  o.checkpoint.save_every = 3;
  const TrainResult ra = quiet_train(o);
  ASSERT_EQ(ra.steps.size(), 4u);
  const std::string c = ckpt::checkpoint_dir(d + "/run", 3);
  const nlohmann::json index = ckpt::read_index(c);
  EXPECT_TRUE(index.at("config").at("tie_word_embeddings").get<bool>());
  for (const auto& [name, t] : index.at("tensors").items())
    EXPECT_EQ(name.find("lm_head"), std::string::npos) << name;
  EXPECT_TRUE(index.at("tensors").contains("optimizer.exp_avg.model.embed_tokens.weight"));

  ASSERT_EQ(run_cli("export --checkpoint " + c + " --out " + d + "/hf", d + "/log"), 0);
  const io::SafetensorsFile f = io::SafetensorsFile::open(d + "/hf/model.safetensors");
  const auto want = oracle::hf_parameter_shapes(o.model);
  ASSERT_EQ(f.tensors().size(), want.size());
  EXPECT_FALSE(f.contains("lm_head.weight"));
  for (const auto& [name, shape] : want) {
    ASSERT_TRUE(f.contains(name)) << name;
    EXPECT_EQ(f.entry(name).shape, shape) << name;
  }
  std::vector<std::string> warnings;
  EXPECT_TRUE(load_model_config(d + "/hf/config.json", &warnings).tie_word_embeddings);

  double oracle_loss = 0;
  ASSERT_NO_FATAL_FAILURE(oracle_loss_of_batch(d, o, 3, &oracle_loss));
  EXPECT_NEAR(ra.steps[3].loss, oracle_loss, 1e-5 * oracle_loss);

  // The exported folder and the checkpoint give one first loss, single and TP 2; an untied
  // model refuses the tied checkpoint, naming the difference.
  TrainOptions i = tiny_options({"single", 1, ""}, 1);
  i.model.tie_word_embeddings = true;
  i.grad_accum = 1;
  i.checkpoint.init_from = d + "/hf";
  const double from_hf = quiet_train(i).steps.at(0).loss;
  i.checkpoint.init_from = c;
  EXPECT_EQ(quiet_train(i).steps.at(0).loss, from_hf);
  i = tiny_options({"tp", 2, ""}, 1);
  i.model.tie_word_embeddings = true;
  i.grad_accum = 1;
  i.checkpoint.init_from = d + "/hf";
  EXPECT_NEAR(quiet_train(i).steps.at(0).loss, from_hf, 2e-5 * from_hf);
  i = tiny_options({"single", 1, ""}, 1);
  i.grad_accum = 1;
  i.checkpoint.init_from = c;
  try {
    quiet_train(i);
    ADD_FAILURE() << "an untied model loaded a tied checkpoint";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tied embeddings"), std::string::npos) << e.what();
  }
  fs::remove_all(d);
}

// An explicit head_dim (12 heads x 8 = 96 beside hidden 48) saved under TSP 2: the export's
// q_proj is [96, 48] and o_proj [48, 96], the oracle (Hugging Face layout, head by head)
// computes the run's next loss from it, and --init-from reads it under TP 2.
TEST(Export, AnExplicitHeadDimExportsTheHuggingFaceLayout) {
  const std::string d = fresh_dir("export_head_dim");
  TrainOptions o = tiny_options({"tsp", 2, ""}, 4);
  o.model.explicit_head_dim = 8;
  o.grad_accum = 1;
  o.checkpoint.save_dir = d + "/run";
  o.checkpoint.save_every = 3;
  const TrainResult ra = quiet_train(o);
  ASSERT_EQ(ra.steps.size(), 4u);
  const std::string c = ckpt::checkpoint_dir(d + "/run", 3);
  ASSERT_EQ(run_cli("export --checkpoint " + c + " --out " + d + "/hf", d + "/log"), 0);
  const io::SafetensorsFile f = io::SafetensorsFile::open(d + "/hf/model.safetensors");
  EXPECT_EQ(f.entry("model.layers.1.self_attn.q_proj.weight").shape, (Shape{96, 48}));
  EXPECT_EQ(f.entry("model.layers.1.self_attn.o_proj.weight").shape, (Shape{48, 96}));
  const auto want = oracle::hf_parameter_shapes(o.model);
  ASSERT_EQ(f.tensors().size(), want.size());
  for (const auto& [name, shape] : want) EXPECT_EQ(f.entry(name).shape, shape) << name;
  std::vector<std::string> warnings;
  EXPECT_EQ(load_model_config(d + "/hf/config.json", &warnings).head_dim(), 8);

  double oracle_loss = 0;
  ASSERT_NO_FATAL_FAILURE(oracle_loss_of_batch(d, o, 3, &oracle_loss));
  EXPECT_NEAR(ra.steps[3].loss, oracle_loss, 1e-5 * oracle_loss);

  TrainOptions i = tiny_options({"tp", 2, ""}, 1);
  i.model.explicit_head_dim = 8;
  i.grad_accum = 1;
  i.checkpoint.init_from = d + "/hf";
  const double from_hf = quiet_train(i).steps.at(0).loss;
  i.checkpoint.init_from = c;
  EXPECT_NEAR(quiet_train(i).steps.at(0).loss, from_hf, 2e-5 * from_hf);
  fs::remove_all(d);
}

TEST(Export, RefusesAnIncompleteCheckpoint) {
  const std::string d = fresh_dir("export_bad");
  fs::create_directories(d + "/step-00000001");
  std::ofstream(d + "/step-00000001/index.json") << "{}";
  EXPECT_NE(run_cli("export --checkpoint " + d + "/step-00000001 --out " + d + "/hf", d + "/log"),
            0);
  std::ifstream in(d + "/log");
  std::stringstream text;
  text << in.rdbuf();
  // The marker is checked first (require_complete): the folder is named as incomplete.
  EXPECT_NE(text.str().find("incomplete"), std::string::npos) << text.str();
  EXPECT_FALSE(fs::exists(d + "/hf/model.safetensors"));
  fs::remove_all(d);
}

}  // namespace
}  // namespace origami::ckpt_test
