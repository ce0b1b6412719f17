#include "origami/io/read_only_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::io {

ReadOnlyFile::ReadOnlyFile(const std::string& path, const std::string& what)
    : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
  if (fd_ < 0)
    throw ConfigError(fmt::format("{}: cannot open '{}': {}", what, path, std::strerror(errno)));
}

ReadOnlyFile::~ReadOnlyFile() { ::close(fd_); }

}  // namespace origami::io
