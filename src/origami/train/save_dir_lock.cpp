#include "origami/train/save_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "origami/core/error.h"

namespace origami::ckpt {

namespace fs = std::filesystem;

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

// "host H pid P started T" as written into the lock file.
struct Holder {
  std::string host;
  long pid = 0;
  std::string started;
  bool parse(const std::string& text) {
    char h[256] = {}, t[64] = {};
    if (std::sscanf(text.c_str(), "host %255s pid %ld started %63s", h, &pid, t) != 3) return false;
    host = h;
    started = t;
    return true;
  }
  std::string describe() const {
    return fmt::format("PID {} on host {} (started {})", pid, host, started);
  }
  bool gone_from_this_host() const {
    return host == host_name() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
  }
};

std::string read_all(int fd) {
  std::string text;
  char buf[512];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0 && text.size() < 4096;)
    text.append(buf, static_cast<std::size_t>(n));
  return text;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

SaveDirLock SaveDirLock::acquire(const std::string& save_dir, const Log& log) {
  std::error_code ec;
  if (fs::exists(save_dir, ec) && !fs::is_directory(save_dir, ec))
    throw ConfigError(fmt::format("--save-dir {} is a file, not a folder; give a folder", save_dir));
  fs::create_directories(save_dir, ec);
  if (!fs::is_directory(save_dir))
    throw ConfigError(fmt::format("--save-dir {}: cannot create the folder: {}; give a writable "
                                  "folder",
                                  save_dir, ec ? ec.message() : std::string("unknown reason")));
  SaveDirLock lock;
  lock.path_ = (fs::path(save_dir) / kLockFile).string();
  lock.fd_ = ::open(lock.path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock.fd_ < 0)
    throw ConfigError(fmt::format("--save-dir {} is not writable ({}: {}); give a writable folder",
                                  save_dir, lock.path_, std::strerror(errno)));
  Holder before;
  const bool named = before.parse(read_all(lock.fd_));
  if (::flock(lock.fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(lock.fd_);
    lock.fd_ = -1;
    if (err != EWOULDBLOCK)
      throw ConfigError(fmt::format("--save-dir {}: cannot lock {}: {}", save_dir, lock.path_,
                                    std::strerror(err)));
    throw ConfigError(fmt::format(
        "--save-dir {} is in use by another run: {}{}; wait for it to end or give another "
        "--save-dir",
        save_dir, named ? before.describe() : std::string("a process that left no name"),
        named && before.gone_from_this_host()
            ? " — that PID is gone, so a process it started still holds the lock"
            : ""));
  }
  // The holder before us unlinks the file as it ends: a lock taken on that unlinked file
  // would not exclude a third run that creates a new one. Then the folder is free: try again.
  struct stat held {}, now {};
  if (::fstat(lock.fd_, &held) != 0 || ::stat(lock.path_.c_str(), &now) != 0 ||
      held.st_ino != now.st_ino || held.st_dev != now.st_dev) {
    ::close(lock.fd_);
    lock.fd_ = -1;
    return acquire(save_dir, log);
  }
  if (named && log)
    log(fmt::format("--save-dir {}: replacing the stale lock of {}{}", save_dir,
                    before.describe(), before.gone_from_this_host() ? " (that PID is gone)" : ""));
  const std::string me =
      fmt::format("host {} pid {} started {}\n", host_name(), static_cast<long>(::getpid()), now_utc());
  if (::ftruncate(lock.fd_, 0) != 0 || ::pwrite(lock.fd_, me.data(), me.size(), 0) !=
                                           static_cast<ssize_t>(me.size()))
    throw ConfigError(fmt::format("--save-dir {} is not writable ({}: {}); give a writable folder",
                                  save_dir, lock.path_, std::strerror(errno)));
  ::fsync(lock.fd_);
  return lock;
}

SaveDirLock::SaveDirLock(SaveDirLock&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}

SaveDirLock& SaveDirLock::operator=(SaveDirLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
  }
  return *this;
}

SaveDirLock::~SaveDirLock() { release(); }

void SaveDirLock::release() {
  if (fd_ < 0) return;
  // Unlink while still holding the lock: a run waiting for it then finds no stale text.
  ::unlink(path_.c_str());
  ::close(fd_);
  fd_ = -1;
}

void remove_partial_files(const std::string& save_dir, const Log& log) {
  std::error_code ec;
  for (const fs::directory_entry& step : fs::directory_iterator(save_dir, ec)) {
    if (!step.is_directory() || step.path().filename().string().rfind("step-", 0) != 0) continue;
    for (const fs::directory_entry& f : fs::directory_iterator(step.path(), ec)) {
      if (f.path().filename().string().find(".tmp.") == std::string::npos) continue;
      std::error_code rm;
      if (fs::remove(f.path(), rm) && log)
        log(fmt::format("removed {}, left by an interrupted save", f.path().string()));
    }
  }
}

}  // namespace origami::ckpt
