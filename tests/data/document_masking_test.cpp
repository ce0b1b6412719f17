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

// --eos-id: a flat file whose documents each end with the eos gives the batches of the Origami
// token file of the same documents (eos included), token for token: ids, labels, documents and
// positions, in both orders; the eos belongs to the document it ends, and tokens after the last
// eos are a last document.
TEST(DocumentMasking, EosIdCutsAFlatFileAsTheTokenFileOfItsDocuments) {
  constexpr std::int32_t kEos = 63;
  const std::vector<std::vector<std::int32_t>> documents{
      {1, 2, kEos}, {kEos}, {5, 6, 7, 8, kEos}, {10, kEos}, {12, 13, 14, 15, kEos}, {16, 17}};
  const std::string prefix = data_test::temp_prefix("eos_tokens");
  const std::string flat = data_test::temp_prefix("eos_flat") + ".bin";
  {
    TokenFileWriter w(prefix, 64, 0);
    std::vector<std::uint16_t> ids;
    for (const auto& d : documents) {
      w.add_document(d);
      ids.insert(ids.end(), d.begin(), d.end());
    }
    w.finish();
    data_test::write_bytes(flat, data_test::le_all(ids));
  }
  for (const DataOrder order : {DataOrder::Random, DataOrder::Epoch}) {
    DataOptions masked;
    masked.document_masking = true;
    masked.order = order;
    const TokenDataset indexed = TokenDataset::open(prefix, masked);
    masked.eos_id = kEos;
    const TokenDataset eos = TokenDataset::open(flat, masked);
    ASSERT_EQ(eos.sources()[0].document_offsets, indexed.sources()[0].document_offsets);
    EXPECT_EQ(eos.sources()[0].documents, 6);
    EXPECT_NE(eos.describe().find("flat uint16, documents end at eos 63"), std::string::npos)
        << eos.describe();
    MemoryTracker tracker;
    const std::int64_t B = 3, S = 7;
    for (std::int64_t step = 0; step < 6; ++step) {
      const Batch a = eos.batch(5, step, B, S, tracker), b = indexed.batch(5, step, B, S, tracker);
      for (std::int64_t i = 0; i < B * S; ++i) {
        ASSERT_EQ(a.input_ids.data<std::int32_t>()[i], b.input_ids.data<std::int32_t>()[i]);
        ASSERT_EQ(a.labels.data<std::int32_t>()[i], b.labels.data<std::int32_t>()[i]);
        ASSERT_EQ(a.documents.data<std::int32_t>()[i], b.documents.data<std::int32_t>()[i]);
        ASSERT_EQ(a.positions.data<std::int64_t>()[i], b.positions.data<std::int64_t>()[i]);
      }
    }
  }
  // documents_ending_at by hand: an eos last, and tokens after the last eos.
  const std::vector<std::int32_t> ids{4, kEos, kEos, 7, 8};
  const TokenView view{reinterpret_cast<const std::uint8_t*>(ids.data()), 4, 5};
  EXPECT_EQ(documents_ending_at(view, kEos), (std::vector<std::int64_t>{0, 2, 3, 5}));
  EXPECT_EQ(documents_ending_at(TokenView{view.data, 4, 3}, kEos),
            (std::vector<std::int64_t>{0, 2, 3}));
}

TEST(DocumentMasking, EosIdIsRefusedWhereItCannotApply) {
  const std::string flat = data_test::temp_prefix("eos_refused") + ".bin";
  data_test::write_bytes(flat, data_test::le_all(std::vector<std::uint16_t>{1, 2, 3, 9, 4, 5}));
  const auto refused = [](const std::string& spec, const DataOptions& o, std::int64_t vocab,
                          const std::string& says) {
    try {
      open_for_training(spec, o, vocab, 4);
      ADD_FAILURE() << spec << " was accepted; expected: " << says;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  DataOptions o;
  o.eos_id = 9;
  refused(flat, o, 16, "add --document-masking or drop --eos-id");  // masking off
  o.document_masking = true;
  EXPECT_EQ(open_for_training(flat, o, 16, 4).sources()[0].documents, 2);
  refused(flat, o, 9, "--eos-id 9 is outside the model's vocabulary of 9 ids");
  o.eos_id = 7;  // in the vocabulary, never in the file
  refused(flat, o, 16, "holds no token 7 before its end");
  o.eos_id = 2;
  const std::string prefix = data_test::temp_prefix("eos_index");
  {
    TokenFileWriter w(prefix, 16, 0);
    w.add_document(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6});
    w.finish();
  }
  refused(prefix, o, 16, "which wins; drop --eos-id");  // only sources with their own index
  EXPECT_EQ(open_for_training(prefix + "," + flat, o, 16, 4).sources()[0].documents, 1);
  refused("", o, 16, "no --data is given");
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
