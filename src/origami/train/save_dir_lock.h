// The --save-dir of a run: checked before any compute (a folder, or creatable as one, and
// writable) and held for the whole run with an advisory lock, so that two runs on one folder
// cannot replace each other's checkpoints (issue 14, items 1 and 6).
//
// The lock is flock(2) on DIR/.origami.lock, which names its holder: host, PID and start
// time. The kernel drops a flock when its process dies (kill -9 included), so a lock left by a
// dead run never blocks: the file's text is then stale and is reported and replaced. A lock
// that is held is refused naming its holder; if that holder is on this host and its PID is
// gone (the lock kept by a child that inherited it), the message says so.
#pragma once

#include <string>

#include "origami/checkpoint/checkpoint.h"

namespace origami::ckpt {

inline constexpr const char* kLockFile = ".origami.lock";

class SaveDirLock {
 public:
  SaveDirLock() = default;  // holds nothing
  // Creates `save_dir` if needed and locks it. ConfigError when it is a file, cannot be
  // created or written, or is locked by another run. A stale holder is reported via `log`.
  static SaveDirLock acquire(const std::string& save_dir, const Log& log);
  SaveDirLock(SaveDirLock&& o) noexcept;
  SaveDirLock& operator=(SaveDirLock&& o) noexcept;
  SaveDirLock(const SaveDirLock&) = delete;
  SaveDirLock& operator=(const SaveDirLock&) = delete;
  ~SaveDirLock();  // removes the lock file and unlocks
  bool held() const { return fd_ >= 0; }

 private:
  void release();
  int fd_ = -1;
  std::string path_;
};

// Removes what interrupted saves leave in `save_dir`'s step-N folders: temporary files of the
// atomic writes ("*.tmp.*"), never a complete file. Call with the lock held.
void remove_partial_files(const std::string& save_dir, const Log& log);

}  // namespace origami::ckpt
