// A whole file mapped read-only into memory (mmap), for token files that are far larger than
// what is worth reading into a vector: pages come in as the sampler touches them and are
// shared by every rank of the host. Errors are ConfigErrors naming the file and the operating
// system's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace origami::io {

class MappedFile {
 public:
  // Maps `path` (a regular file; an empty one maps to no bytes). `what` names the input in
  // messages, e.g. "--data".
  MappedFile(const std::string& path, const std::string& what);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }

 private:
  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace origami::io
