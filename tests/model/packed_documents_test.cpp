// Packed documents on one device: a row of several documents (TokenBatch::documents and
// positions) gives exactly the loss and gradients of the documents run one by one, so no
// attention, label or position crosses a boundary; malformed document arrays are refused.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "origami/core/error.h"
#include "origami/kernels/cross_entropy.h"
#include "origami/model/llama.h"
#include "tiny_model.h"

namespace origami {
namespace {

using model_test::relative_difference;
using model_test::tiny;

// One packed row of documents of these lengths: random ids, labels the next token of the same
// document (the last token of each document has none), document ids and positions.
struct PackedRow {
  std::vector<std::int64_t> lengths;
  std::vector<std::int32_t> ids, labels, documents;
  std::vector<std::int64_t> positions;
  std::int64_t size() const { return static_cast<std::int64_t>(ids.size()); }
  TokenBatch packed() const {
    return {1, size(), ids.data(), labels.data(), documents.data(), positions.data()};
  }
};
PackedRow packed_row(std::vector<std::int64_t> lengths, std::int64_t vocab, unsigned seed) {
  std::mt19937 gen(seed);
  PackedRow r;
  r.lengths = std::move(lengths);
  for (std::size_t d = 0; d < r.lengths.size(); ++d)
    for (std::int64_t i = 0; i < r.lengths[d]; ++i) {
      r.ids.push_back(static_cast<std::int32_t>(gen() % vocab));
      r.documents.push_back(static_cast<std::int32_t>(d));
      r.positions.push_back(i);
    }
  r.labels.resize(r.ids.size());
  for (std::size_t s = 0; s < r.ids.size(); ++s) {
    const bool last = s + 1 == r.ids.size() || r.documents[s + 1] != r.documents[s];
    r.labels[s] = last ? kernels::kIgnoreLabel : r.ids[s + 1];
  }
  return r;
}

TEST(PackedDocuments, LossAndGradientsEqualTheDocumentsRunSeparately) {
  const ModelConfig c = tiny();
  // A one-token document, short ones, and one of 40: 63 tokens in one row.
  const PackedRow row = packed_row({1, 9, 40, 2, 11}, c.vocab_size, 3);
  MemoryTracker ta, tb;
  LlamaModel packed(c, ta, 7), separate(c, tb, 7);
  const LossResult lp = packed.forward_backward(row.packed(), 1.0);
  double sum = 0;
  std::int64_t count = 0, begin = 0;
  for (std::int64_t n : row.lengths) {
    // Each document alone, at positions 0 .. n-1, as an unbroken row.
    const LossResult l = separate.forward_backward(
        {1, n, row.ids.data() + begin, row.labels.data() + begin}, 1.0);
    sum += l.sum;
    count += l.count;
    begin += n;
  }
  EXPECT_EQ(lp.count, count);
  EXPECT_NEAR(lp.sum, sum, 1e-5 * std::abs(sum));
  const auto gp = named_tensors(packed.grads()), gs = named_tensors(separate.grads());
  for (std::size_t i = 0; i < gp.size(); ++i)
    EXPECT_LE(relative_difference(*gp[i].tensor, *gs[i].tensor), 1e-5) << gp[i].name;

  // The same row without its documents: attention and positions run across the boundaries,
  // and the loss is another (what this test catches if documents were ignored).
  MemoryTracker tc;
  LlamaModel unbroken(c, tc, 7);
  const LossResult lu =
      unbroken.forward({1, row.size(), row.ids.data(), row.labels.data()});
  EXPECT_GT(std::abs(lu.sum - sum), 1e-3 * std::abs(sum));
}

TEST(PackedDocuments, RowsOfABatchKeepTheirOwnBoundaries) {
  const ModelConfig c = tiny();
  const PackedRow a = packed_row({20, 1, 11}, c.vocab_size, 4), b = packed_row({5, 27}, c.vocab_size, 5);
  auto join = [](auto x, const auto& y) {
    x.insert(x.end(), y.begin(), y.end());
    return x;
  };
  const auto ids = join(a.ids, b.ids), labels = join(a.labels, b.labels);
  const auto docs = join(a.documents, b.documents);
  const auto pos = join(a.positions, b.positions);
  MemoryTracker ta, tb;
  LlamaModel two(c, ta, 11), one(c, tb, 11);
  const LossResult both = two.forward({2, 32, ids.data(), labels.data(), docs.data(), pos.data()});
  const double each = one.forward(a.packed()).sum + one.forward(b.packed()).sum;
  EXPECT_NEAR(both.sum, each, 1e-5 * std::abs(each));
}

TEST(PackedDocuments, MalformedDocumentsAreRefused) {
  const ModelConfig c = tiny();
  MemoryTracker tracker;
  LlamaModel model(c, tracker, 1);
  PackedRow row = packed_row({4, 4}, c.vocab_size, 6);
  auto refuses = [&](const PackedRow& r, const char* what) {
    try {
      model.forward(r.packed());
      ADD_FAILURE() << "accepted: " << what;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("packed row 0"), std::string::npos) << e.what();
    }
  };
  PackedRow skip = row;
  skip.documents[4] = 2;  // a document id jumps
  refuses(skip, "a skipped document id");
  PackedRow cont = row;
  cont.positions[4] = 4;  // the second document continues the first's positions
  refuses(cont, "positions continuing across a document");
  PackedRow far = row;
  for (int s = 0; s < 4; ++s) far.positions[s] += 200;  // a continuation past the tables
  refuses(far, "positions past the RoPE tables");
  TokenBatch half = row.packed();
  half.positions = nullptr;
  EXPECT_THROW(model.forward(half), ConfigError);
}

}  // namespace
}  // namespace origami
