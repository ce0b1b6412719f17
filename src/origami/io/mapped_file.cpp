#include "origami/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/io/read_only_file.h"

namespace origami::io {

MappedFile::MappedFile(const std::string& path, const std::string& what) : path_(path) {
  const ReadOnlyFile file(path, what);
  const int fd = file.fd();
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw ConfigError(fmt::format("{}: cannot stat '{}': {}", what, path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    throw ConfigError(fmt::format("{}: '{}' is not a regular file (a token file is mapped into "
                                  "memory); give a file",
                                  what, path));
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ == 0) return;  // mmap refuses a length of 0
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED)
    throw ConfigError(fmt::format("{}: cannot map '{}' ({} bytes) into memory: {}", what, path,
                                  size_, std::strerror(errno)));
  data_ = static_cast<const std::uint8_t*>(p);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

}  // namespace origami::io
