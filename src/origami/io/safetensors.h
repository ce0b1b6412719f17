// The safetensors format (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON
//   {"__metadata__": {"k": "v", ...}, "name": {"dtype": "F32", "shape": [2, 3],
//    "data_offsets": [begin, end]}, ...}
// then the data section, in which each tensor occupies [begin, end) bytes, row-major.
//
// The reader is strict, because these files cross a trust boundary (checkpoints, the PyTorch
// oracle's outputs): the header length is bounded by the file, the JSON is valid and at most
// three levels deep, each tensor's shape product cannot overflow, byte size == numel * dtype
// size, the tensors tile the data section exactly (sorted by offset: contiguous, no overlap,
// no hole, nothing after the last one), names are unique and non-empty, and only the dtypes
// Origami knows (F32, BF16, F16, F64, I32, I64) are accepted. Every refusal is an origami::Error
// naming the file and the problem; nothing reads outside the buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "origami/core/dtype.h"
#include "origami/core/memory_tracker.h"
#include "origami/core/tensor.h"

namespace origami::io {

// Largest header accepted (the reference implementation's limit).
inline constexpr std::uint64_t kMaxSafetensorsHeader = 100u << 20;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::int64_t numel = 0;
  std::uint64_t begin = 0;  // byte offsets inside the data section
  std::uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Maps the file read-only. Throws Error naming `path` if it cannot be opened or is invalid.
  // The file must not be truncated while mapped (that would fault on access); the writer
  // below never does that: it replaces files by rename, which leaves old mappings intact.
  static SafetensorsFile open(const std::string& path);
  // Parses an in-memory copy (the fuzzer's entry point); `label` names it in errors.
  static SafetensorsFile from_bytes(std::vector<std::uint8_t> bytes,
                                    std::string label = "<memory>");

  const std::string& label() const { return label_; }
  // Tensors in data-offset order.
  const std::vector<SafetensorsEntry>& tensors() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // Throws Error naming the file and the tensor if it is absent.
  const SafetensorsEntry& entry(const std::string& name) const;
  // The tensor's bytes, exactly (end - begin) of them; unaligned.
  std::span<const std::byte> bytes(const std::string& name) const;

  // A new tensor with the file's dtype and shape, accounted under `category`.
  Tensor read(const std::string& name, MemoryTracker& tracker, MemCategory category) const;
  // Copies into an existing tensor; its dtype and shape must equal the file's.
  void read_into(const std::string& name, Tensor& dst) const;
  // Copies the rectangular block at `offsets` whose shape is dst's shape (same rank as the
  // stored tensor, every offsets[i] + dst.dim(i) <= shape[i]); dtype must match. This is how
  // a rank loads only its shard of a parameter.
  void read_block(const std::string& name, const Shape& offsets, Tensor& dst) const;
  // read_block into an F32 destination from an F32, BF16 or F16 tensor, widening each element
  // (exact: every bf16 and fp16 value, subnormals, infinities and NaN payloads included, is an
  // fp32 value). How Hugging Face's half-precision checkpoints load into fp32 parameters.
  void read_block_as_f32(const std::string& name, const Shape& offsets, Tensor& dst) const;
  // Every element converted to double (any dtype; BF16 and F16 widened exactly). For
  // comparisons.
  std::vector<double> read_as_f64(const std::string& name) const;

  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;

 private:
  struct Storage;  // owns the bytes: an mmap or a vector
  SafetensorsFile(std::shared_ptr<const Storage> storage, std::string label);
  void parse();
  const std::byte* data_section() const;

  std::shared_ptr<const Storage> storage_;
  std::string label_;
  std::uint64_t data_offset_ = 0;  // 8 + header length
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Collects tensors (by pointer: the caller keeps them alive until write()) and writes them
// in the order added. The write is atomic: a temporary file in the destination's folder,
// fsync, rename over the destination, fsync of the folder; on any failure the destination is
// untouched and the temporary removed.
class SafetensorsWriter {
 public:
  void add(std::string name, DType dtype, Shape shape, const void* data);
  void add(std::string name, const Tensor& tensor);
  void set_metadata(std::string key, std::string value);
  // The complete file image (header padded with spaces so the data starts 8-byte aligned).
  std::vector<std::uint8_t> serialize() const;
  void write(const std::string& path) const;

 private:
  struct Item {
    std::string name;
    DType dtype;
    Shape shape;
    std::uint64_t bytes;
    const void* data;
  };
  std::vector<Item> items_;
  std::map<std::string, std::string> metadata_;
};

// The fp32 values of a bf16 (its top 16 bits) and of an IEEE fp16 bit pattern, exactly.
float bf16_to_f32(std::uint16_t bits);
float f16_to_f32(std::uint16_t bits);

// Writes `bytes` to `path` atomically (temporary file in the same folder, fsync, rename).
void write_file_atomically(const std::string& path, std::span<const std::uint8_t> bytes);

}  // namespace origami::io
