// Document masking of the batches (--document-masking, docs/data.md "Packed documents"): each
// row's documents, positions and boundary labels from the token file's index, the same
// tokens as without it, and sources without a document index refused.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data_files.h"
#include "origami/core/error.h"
#include "origami/data/dataset.h"
#include "origami/data/token_file.h"
#include "origami/kernels/cross_entropy.h"

namespace origami::data {
namespace {

constexpr std::int32_t kIgnore = kernels::kIgnoreLabel;

TEST(DocumentMasking, CutAtDocumentsRestartsPositionsAndMasksBoundaryLabels) {
  // Documents [0, 3) [3, 4) [4, 9) [9, 12); a window of 7 tokens from 2: tokens 2 .. 8.
  const std::vector<std::int64_t> offsets{0, 3, 4, 9, 12};
  std::vector<std::int32_t> docs(7), labels(7, 5);
  std::vector<std::int64_t> pos(7);
  cut_at_documents(offsets, 2, 7, docs.data(), pos.data(), labels.data());
  EXPECT_EQ(docs, (std::vector<std::int32_t>{0, 1, 2, 2, 2, 2, 2}));
  // The row's first token continues document 0 at position 0 (the part before the window is
  // not in the row); the one-token document 3..4 is its own.
  EXPECT_EQ(pos, (std::vector<std::int64_t>{0, 0, 0, 1, 2, 3, 4}));
  // Token 2 ends document 0, token 3 is a whole document: their labels are another document's
  // first token. Token 8 ends document [4, 9): its label (token 9) is masked too.
  EXPECT_EQ(labels, (std::vector<std::int32_t>{kIgnore, kIgnore, 5, 5, 5, 5, kIgnore}));
}

TEST(DocumentMasking, BatchesCarryTheDocumentsOfTheirWindows) {
  const std::string prefix = data_test::temp_prefix("docs");
  const std::vector<std::vector<std::int32_t>> documents{{1, 2, 3}, {4}, {5, 6, 7, 8, 9}, {10, 11}, {12, 13, 14, 15}};
  {
    TokenFileWriter w(prefix, 64, 0);
    for (const auto& d : documents) w.add_document(d);
    w.finish();
  }
  DataOptions masked;
  masked.document_masking = true;
  const TokenDataset on = TokenDataset::open(prefix, masked), off = TokenDataset::open(prefix);
  EXPECT_TRUE(on.document_masking());
  MemoryTracker tracker;
  const std::int64_t B = 4, S = 6;
  for (std::int64_t step = 0; step < 5; ++step) {
    const Batch a = on.batch(9, step, B, S, tracker), b = off.batch(9, step, B, S, tracker);
    ASSERT_TRUE(a.documents.defined() && a.positions.defined());
    EXPECT_FALSE(b.documents.defined());
    for (std::int64_t r = 0; r < B; ++r) {
      const std::int64_t start = on.window_start(9, step, B, r, S);
      for (std::int64_t s = 0; s < S; ++s) {
        const std::int64_t i = r * S + s, t = start + s;
        // The same tokens; a label is kept unless token t ends its document.
        EXPECT_EQ(a.input_ids.data<std::int32_t>()[i], b.input_ids.data<std::int32_t>()[i]);
        const bool ends = t + 1 == 3 || t + 1 == 4 || t + 1 == 9 || t + 1 == 11;
        EXPECT_EQ(a.labels.data<std::int32_t>()[i],
                  ends ? kIgnore : b.labels.data<std::int32_t>()[i]);
        // Token ids here are t + 1, so the document boundaries can be read off the ids.
        const std::int32_t id = a.input_ids.data<std::int32_t>()[i];
        const bool begins = s == 0 || id == 4 || id == 5 || id == 10 || id == 12;
        if (s > 0) {
          EXPECT_EQ(a.documents.data<std::int32_t>()[i],
                    a.documents.data<std::int32_t>()[i - 1] + (begins ? 1 : 0));
        } else {
          EXPECT_EQ(a.documents.data<std::int32_t>()[i], 0);
        }
        EXPECT_EQ(a.positions.data<std::int64_t>()[i],
                  begins ? 0 : a.positions.data<std::int64_t>()[i - 1] + 1);
      }
    }
  }
}

TEST(DocumentMasking, MegatronDocumentsAreTheGroupsOfItsIndex) {
  // Sequences of 3, 2 and 4 tokens; documents [0, 1] and [2]: a boundary at token 5 only.
  const std::string prefix = data_test::temp_prefix("megatron");
  data_test::write_bytes(prefix + ".bin",
                         data_test::le_all<std::uint16_t>({1, 2, 3, 4, 5, 6, 7, 8, 9}));
  data_test::write_bytes(prefix + ".idx",
                         data_test::megatron_index(8, {3, 2, 4}, {0, 6, 10}, {0, 2, 3}));
  DataOptions masked;
  masked.document_masking = true;
  masked.order = DataOrder::Epoch;  // windows at multiples of S: the one window from 0
  const TokenDataset d = TokenDataset::open(prefix, masked);
  MemoryTracker tracker;
  const Batch b = d.batch(1, 0, 1, 8, tracker);
  EXPECT_EQ(std::vector<std::int32_t>(b.documents.data<std::int32_t>(),
                                      b.documents.data<std::int32_t>() + 8),
            (std::vector<std::int32_t>{0, 0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(b.labels.data<std::int32_t>()[4], kIgnore);  // token 4 ends the first document
}

TEST(DocumentMasking, SourcesWithoutADocumentIndexAreRefused) {
  const std::string text = data_test::temp_prefix("text") + ".txt";
  data_test::write_bytes(text, data_test::Bytes(100, 'a'));
  DataOptions masked;
  masked.document_masking = true;
  try {
    TokenDataset::open(text, masked);
    ADD_FAILURE() << "a text file was accepted for document masking";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(text), std::string::npos) << m;
    EXPECT_NE(m.find("origami tokenize"), std::string::npos) << m;
  }
  EXPECT_THROW(TokenDataset::open("", masked), ConfigError);  // the built-in corpus
}

}  // namespace
}  // namespace origami::data
