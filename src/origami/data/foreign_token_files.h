// Token files in the formats users already have (docs/data.md), mapped read-only and checked
// up front like Origami's own (token_file.h); each defect is a ConfigError naming the file and
// the byte offset.
//
// * Flat token files (nanoGPT's train.bin: raw little-endian uint16 or uint32 ids, no header;
//   documents separated by an end-of-text token, which is an ordinary token to the sampler).
// * llm.c's .bin: a header of 256 little-endian int32 — magic 20240520 with version 1 (uint16
//   ids, GPT-2) or magic 20240801 with version 7 (uint32 ids, Llama 3) — then header[2] ids.
//   Detected by its magic: a file that starts with one is read as llm.c's, and refused when
//   the rest of its header disagrees (version, count against the size).
// * Megatron-LM's indexed dataset (PREFIX.bin + PREFIX.idx, "MMIDIDX"; see
//   megatron/core/datasets/indexed_dataset.py): the .idx holds
//     magic "MMIDIDX\0\0" (9 bytes), version uint64 (1), dtype code uint8,
//     sequence count S uint64, document-index count D+1 uint64,
//     S int32 sequence lengths, S int64 byte pointers into the .bin, D+1 int64 document
//     indices (sequence numbers, 0 first and S last),
//   optionally followed by S int8 sequence modes (multimodal datasets; ignored). Tokens are
//   uint16 (code 8, Megatron's choice below 65500 ids) or int32 (code 4); the sequences must be
//   stored back to back from byte 0 (as Megatron's builder writes them), so that the .bin is
//   one stream of tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "origami/data/token_view.h"
#include "origami/io/mapped_file.h"

namespace origami::data {

// What a reader found: the tokens, their documents (0 when the format does not say) and the
// largest id (checked against the model's vocabulary before training).
struct ForeignTokenFile {
  std::string format;  // "flat uint16", "llm.c (uint16)", "Megatron indexed (int32)", ...
  std::shared_ptr<const io::MappedFile> storage;
  TokenView tokens;
  std::int64_t documents = 0;
  // Megatron: the documents' token offsets, 0 = o[0] < ... < o[D] = tokens (a document is the
  // sequences its document index groups); empty for the flat and llm.c files.
  std::vector<std::int64_t> document_offsets;
  LargestId largest;
};

inline constexpr std::int32_t kLlmcMagicGpt2 = 20240520, kLlmcMagicLlama3 = 20240801;
inline constexpr std::int64_t kLlmcHeaderInts = 256;

// `path` as an llm.c .bin when it starts with a valid llm.c header, else as flat ids of
// `width` bytes (2 or 4).
ForeignTokenFile open_flat_token_file(const std::string& path, int width);

// Whether PREFIX.idx and PREFIX.bin both exist.
bool is_megatron_prefix(const std::string& prefix);
ForeignTokenFile open_megatron_dataset(const std::string& prefix);

}  // namespace origami::data
