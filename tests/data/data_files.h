// Shared pieces of the data tests: temporary paths, writing and reading raw bytes, and byte-exact
// little-endian fixtures of the formats (written by hand from their specs, docs/data.md).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace origami::data_test {

using Bytes = std::vector<std::uint8_t>;

// What every temporary path of this test program starts with.
inline std::string temp_stem() { return "origami_data_" + std::to_string(::getpid()) + "_"; }

// A fresh path prefix in the test's temporary directory (removed when the program ends).
inline std::string temp_prefix(const std::string& tag) {
  static int counter = 0;
  return ::testing::TempDir() + temp_stem() + tag + "_" + std::to_string(counter++);
}

// Removes the program's temporary files once every test has run.
class RemoveTempFiles : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(::testing::TempDir(), ec))
      if (e.path().filename().string().rfind(temp_stem(), 0) == 0)
        std::filesystem::remove_all(e.path(), ec);
  }
};
inline const bool kRemoveTempFilesRegistered =
    (::testing::AddGlobalTestEnvironment(new RemoveTempFiles), true);

inline void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

inline Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Appends `v` little-endian in sizeof(T) bytes.
template <typename T>
void le(Bytes& out, T v) {
  std::uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof v);
  out.insert(out.end(), b, b + sizeof(T));
}

template <typename T>
Bytes le_all(const std::vector<T>& values) {
  Bytes out;
  for (const T v : values) le(out, v);
  return out;
}

// Writes PREFIX.index and PREFIX.tokens by hand (the format of data/token_file.h).
inline void write_origami_files(const std::string& prefix, std::uint32_t width,
                                std::uint64_t vocab, const std::vector<std::uint64_t>& offsets,
                                const Bytes& tokens) {
  Bytes ix = {'O', 'R', 'G', 'T', 'O', 'K', 'I', 'X'};
  le<std::uint32_t>(ix, 1);
  le<std::uint32_t>(ix, width);
  le<std::uint64_t>(ix, vocab);
  le<std::uint64_t>(ix, 0x1234);
  le<std::uint64_t>(ix, offsets.size() - 1);
  le<std::uint64_t>(ix, offsets.back());
  for (const std::uint64_t o : offsets) le(ix, o);
  write_bytes(prefix + ".index", ix);
  write_bytes(prefix + ".tokens", tokens);
}

// A Megatron MMIDIDX index (megatron/core/datasets/indexed_dataset.py, version 1).
inline Bytes megatron_index(std::uint8_t dtype_code, const std::vector<std::int32_t>& lengths,
                            const std::vector<std::int64_t>& pointers,
                            const std::vector<std::int64_t>& document_indices) {
  Bytes ix = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
  le<std::uint64_t>(ix, 1);
  ix.push_back(dtype_code);
  le<std::uint64_t>(ix, lengths.size());
  le<std::uint64_t>(ix, document_indices.size());
  for (const auto v : lengths) le(ix, v);
  for (const auto v : pointers) le(ix, v);
  for (const auto v : document_indices) le(ix, v);
  return ix;
}

}  // namespace origami::data_test
