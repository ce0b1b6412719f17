#include "origami/io/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "origami/core/error.h"
#include "origami/io/read_only_file.h"

namespace origami::io {

namespace {
std::string mib(std::int64_t bytes) { return fmt::format("{} MiB", bytes >> 20); }
}  // namespace

std::string read_text_file(const std::string& path, std::int64_t limit, const std::string& what) {
  const ReadOnlyFile file(path, what);
  const int fd = file.fd();
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
    throw ConfigError(fmt::format("{}: '{}' is a directory; give a file", what, path));
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > limit)
    throw ConfigError(fmt::format("{}: '{}' has {} bytes, more than the limit of {}; give a "
                                  "smaller file",
                                  what, path, static_cast<std::int64_t>(st.st_size), mib(limit)));
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw ConfigError(fmt::format("{}: cannot read '{}': {}", what, path, std::strerror(errno)));
    if (n == 0) return text;
    if (static_cast<std::int64_t>(text.size()) + n > limit)
      throw ConfigError(fmt::format("{}: '{}' goes on beyond the limit of {} (a device or a "
                                    "pipe without end?); give a regular file",
                                    what, path, mib(limit)));
    text.append(buf, static_cast<std::size_t>(n));
  }
}

}  // namespace origami::io
