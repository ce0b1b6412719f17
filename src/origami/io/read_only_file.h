// A file opened read-only (O_CLOEXEC), closed when this goes: the one place the readers of
// text and mapped files open a path, refusing a missing or unreadable one with the operating
// system's reason.
#pragma once

#include <string>

namespace origami::io {

class ReadOnlyFile {
 public:
  // ConfigError "WHAT: cannot open 'PATH': reason" when the file cannot be opened.
  ReadOnlyFile(const std::string& path, const std::string& what);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace origami::io
