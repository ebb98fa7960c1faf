#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace flopscope::daemon {

// The one-daemon-per-data-directory rule: an exclusive flock(2) on <data_dir>/flopscoped.lock,
// held for the daemon's lifetime, with the holder's pid written into the file for the message
// a second daemon prints. The kernel drops the lock when the holder's last descriptor closes,
// whatever way it died, so a restart after kill -9 never finds a stale lock; unlike a connect()
// probe on the socket it cannot mistake a dying process for a live one for longer than that
// process takes to close its files.
//
// Thread-safe after construction (immutable); destroying it releases the lock.
class DataDirLock {
 public:
  // Takes the lock of `data_dir` (which must exist). While the holder is dying (a zombie or
  // gone, its threads still closing descriptors) it waits up to `dying_wait` for the release.
  // FAILED_PRECONDITION naming the holder's pid when another live process holds it.
  static absl::StatusOr<std::unique_ptr<DataDirLock>> Acquire(
      const std::string& data_dir, absl::Duration dying_wait = absl::Seconds(10));
  ~DataDirLock();
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  DataDirLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  const std::string path_;
  const int fd_;
};

// The lock file's path under `data_dir`.
std::string DataDirLockPath(const std::string& data_dir);

}  // namespace flopscope::daemon
