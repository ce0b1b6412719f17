// Exact resume from token files: a blend of an Origami token file and a flat uint16 file,
// N steps, save, M more steps == N + M steps without stopping — bit for bit under the same
// strategy, and to float32 rounding under another one (its reductions sum in another order;
// the batches themselves are the same, tests/data RowsAreTheSliceOfTheWholeBatch).
#include <filesystem>
#include <functional>
#include <fstream>

#include <gtest/gtest.h>

#include "ckpt_util.h"
#include "origami/data/token_file.h"
#include "origami/data/dataset.h"

namespace origami::ckpt_test {
namespace {

// The built-in corpus as an Origami token file of 40-token documents (vocabulary 256), and
// its reversed bytes as a flat uint16 file: "PREFIX:0.6,FILE.bin:0.4".
std::string token_blend(const std::string& dir) {
  const std::string_view text = data::default_corpus_text();
  const std::vector<std::int32_t> ids = data::ByteTokenizer::encode(text);
  data::TokenFileWriter w(dir + "/corpus", 256, 0);
  for (std::size_t i = 0; i < ids.size(); i += 40)
    w.add_document(std::span(ids).subspan(i, std::min<std::size_t>(40, ids.size() - i)));
  w.finish();
  std::ofstream flat(dir + "/reversed.bin", std::ios::binary);
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
    const auto v = static_cast<std::uint16_t>(*it);
    flat.write(reinterpret_cast<const char*>(&v), 2);
  }
  return dir + "/corpus:0.6," + dir + "/reversed.bin:0.4";
}

TrainOptions options(const Layout& l, const std::string& data, std::int64_t steps) {
  TrainOptions o = tiny_options(l, steps);
  o.data_path = data;
  return o;
}

class TokenFileResume : public ::testing::TestWithParam<Layout> {};

TEST_P(TokenFileResume, StopSaveResumeEqualsUninterruptedBitForBit) {
  const Layout l = GetParam();
  const std::string d = fresh_dir("tokdata"), a = fresh_dir("a"), b = fresh_dir("b");
  const std::string data = token_blend(d);
  TrainOptions oa = options(l, data, 5);
  oa.checkpoint.save_dir = a;
  oa.checkpoint.save_every = 3;
  const TrainResult ra = quiet_train(oa);
  ASSERT_EQ(ra.steps.size(), 5u);
  TrainOptions ob = options(l, data, 5);
  ob.checkpoint.resume = ckpt::checkpoint_dir(a, 3);
  ob.checkpoint.save_dir = b;
  const TrainResult rb = quiet_train(ob);
  ASSERT_EQ(rb.steps.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(rb.steps[k].step, ra.steps[3 + k].step);
    EXPECT_EQ(rb.steps[k].loss, ra.steps[3 + k].loss) << "step " << rb.steps[k].step;
    EXPECT_EQ(rb.steps[k].grad_norm, ra.steps[3 + k].grad_norm);
    EXPECT_GE(rb.steps[k].data_wait_seconds, 0);
  }
  expect_same_tensors(ckpt::checkpoint_dir(a, 5), ckpt::checkpoint_dir(b, 5));
  // The blend is not the built-in corpus: the losses differ from a run on it.
  const TrainResult corpus = quiet_train(tiny_options(l, 1));
  EXPECT_NE(corpus.steps[0].loss, ra.steps[0].loss);
  for (const std::string& dir : {d, a, b}) std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Strategies, TokenFileResume,
                         ::testing::Values(Layout{"single", 1, ""}, Layout{"dp", 2, ""},
                                           Layout{"tsp", 2, ""}),
                         [](const auto& info) { return info.param.name(); });

// Saved on one device, resumed under TSP 2 and under dp=2,tsp=2: the next steps' losses are
// the uninterrupted run's to float32 rounding (the bound of reshard_test.cpp).
TEST(TokenFileResume, UnderAnotherStrategy) {
  const std::string d = fresh_dir("tokdata"), a = fresh_dir("a");
  const std::string data = token_blend(d);
  TrainOptions oa = options({"single", 1, ""}, data, 5);
  oa.checkpoint.save_dir = a;
  oa.checkpoint.save_every = 3;
  const TrainResult ra = quiet_train(oa);
  for (const Layout& to : {Layout{"tsp", 2, ""}, Layout{"tsp", 1, "dp=2,tsp=2"}}) {
    TrainOptions ob = options(to, data, 5);
    ob.checkpoint.resume = ckpt::checkpoint_dir(a, 3);
    const TrainResult rb = quiet_train(ob);
    ASSERT_EQ(rb.steps.size(), 2u);
    for (std::size_t k = 0; k < 2; ++k) {
      const double want = ra.steps[3 + k].loss;
      EXPECT_NEAR(rb.steps[k].loss, want, 2e-5 * std::abs(want)) << to.name() << " step " << 4 + k;
      EXPECT_NEAR(rb.steps[k].grad_norm, ra.steps[3 + k].grad_norm,
                  1e-4 * ra.steps[3 + k].grad_norm);
    }
  }
  std::filesystem::remove_all(d);
  std::filesystem::remove_all(a);
}

// Resumes step 3 of run `ra` (checkpoints in `saved`, 5 steps) with `setting` applied, on one
// device and under TSP 2: steps 4 and 5 give ra's losses, bitwise on one device and to
// rounding under TSP (another reduction order).
void expect_exact_resume(const std::string& data, const std::string& saved, const TrainResult& ra,
                         const std::function<void(TrainOptions&)>& setting) {
  for (const Layout& to : {Layout{"single", 1, ""}, Layout{"tsp", 2, ""}}) {
    TrainOptions ob = options(to, data, 5);
    setting(ob);
    ob.checkpoint.resume = ckpt::checkpoint_dir(saved, 3);
    const TrainResult rb = quiet_train(ob);
    ASSERT_EQ(rb.steps.size(), 2u);
    for (std::size_t k = 0; k < 2; ++k) {
      const double want = ra.steps[3 + k].loss;
      if (to.strategy == "single")
        EXPECT_EQ(rb.steps[k].loss, want);
      else
        EXPECT_NEAR(rb.steps[k].loss, want, 2e-5 * std::abs(want)) << to.name();
    }
  }
}

// The epoch order resumes as exactly: bitwise on one device, to rounding under TSP 2; and a
// resume with the other order is refused.
TEST(TokenFileResume, EpochOrder) {
  const std::string d = fresh_dir("tokdata"), a = fresh_dir("a");
  const std::string data = token_blend(d);
  TrainOptions oa = options({"single", 1, ""}, data, 5);
  oa.data_order = "epoch";
  oa.checkpoint.save_dir = a;
  oa.checkpoint.save_every = 3;
  const TrainResult ra = quiet_train(oa);
  TrainOptions random = options({"single", 1, ""}, data, 1);
  EXPECT_NE(quiet_train(random).steps[0].loss, ra.steps[0].loss);  // other windows
  expect_exact_resume(data, a, ra, [](TrainOptions& o) { o.data_order = "epoch"; });
  TrainOptions other = options({"single", 1, ""}, data, 5);
  other.checkpoint.resume = ckpt::checkpoint_dir(a, 3);
  try {
    quiet_train(other);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("saved with --data-order epoch"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(d);
  std::filesystem::remove_all(a);
}

// Packed documents (--document-masking, the token file's 40-token documents) resume as
// exactly: bitwise on one device, to rounding under TSP 2 (zigzag, and balanced); a resume
// without the flag is refused.
TEST(TokenFileResume, DocumentMasking) {
  const std::string d = fresh_dir("tokdata"), a = fresh_dir("a");
  token_blend(d);
  const std::string data = d + "/corpus";  // the Origami token file alone: it has an index
  TrainOptions oa = options({"single", 1, ""}, data, 5);
  oa.document_masking = true;
  oa.checkpoint.save_dir = a;
  oa.checkpoint.save_every = 3;
  const TrainResult ra = quiet_train(oa);
  TrainOptions unmasked = options({"single", 1, ""}, data, 1);
  EXPECT_NE(quiet_train(unmasked).steps[0].loss, ra.steps[0].loss);  // other attention
  expect_exact_resume(data, a, ra, [](TrainOptions& o) { o.document_masking = true; });
  // Resumed under TSP 2 with the balanced layout: each micro-batch's chunks assigned by its
  // documents' work (parallel/balanced_layout.h), the cursor the same; losses to rounding.
  TrainOptions balanced = options({"tsp", 2, ""}, data, 5);
  balanced.document_masking = true;
  balanced.layout = "balanced";
  balanced.checkpoint.resume = ckpt::checkpoint_dir(a, 3);
  const TrainResult rb = quiet_train(balanced);
  ASSERT_EQ(rb.steps.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k)
    EXPECT_NEAR(rb.steps[k].loss, ra.steps[3 + k].loss, 2e-5 * std::abs(ra.steps[3 + k].loss))
        << "balanced step " << 4 + k;
  TrainOptions other = options({"single", 1, ""}, data, 5);
  other.checkpoint.resume = ckpt::checkpoint_dir(a, 3);
  try {
    quiet_train(other);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("saved with --document-masking"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(d);
  std::filesystem::remove_all(a);
}

// A token file whose vocabulary exceeds the model's is refused before training, naming both.
TEST(TokenFileResume, LargerVocabularyIsRefusedBeforeTraining) {
  const std::string d = fresh_dir("vocab");
  {
    data::TokenFileWriter w(d + "/big", 300, 0);
    w.add_document(std::vector<std::int32_t>(100, 7));
    w.finish();
  }
  for (const Layout& l : {Layout{"single", 1, ""}, Layout{"tsp", 2, ""}}) {
    try {
      quiet_train(options(l, d + "/big", 1));
      FAIL() << l.name();
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("vocabulary of 300"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("vocab_size is 256"), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace origami::ckpt_test
