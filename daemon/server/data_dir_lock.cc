#include "daemon/server/data_dir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace flopscope::daemon {
namespace {

// How long a holder that still looks alive gets to turn out to be dying (kill -9 leaves it
// running in the kernel's exit path for a moment) before a second daemon gives up.
constexpr absl::Duration kLiveHolderWait = absl::Seconds(1);
constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

// The pid the holder wrote into the lock file, or 0 when none (yet) is there.
int64_t ReadHolderPid(int fd) {
  char text[32] = {};
  const ssize_t n = pread(fd, text, sizeof text - 1, 0);
  int64_t pid = 0;
  if (n <= 0 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(text, n)), &pid)) {
    return 0;
  }
  return pid;
}

// True when `pid` runs and is not a zombie: its state letter in /proc/<pid>/stat (after the
// parenthesised command name, which may itself hold ')') is not Z or X.
bool ProcessIsRunning(int64_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state != 'Z' && state != 'X';
}

std::string HolderText(int64_t pid) {
  return pid > 0 ? absl::StrCat("pid ", pid) : std::string("a process that wrote no pid");
}

// Replaces the file's content with our pid, for the message a second daemon prints.
void WritePid(int fd) {
  const std::string text = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0) return;  // the lock holds either way; only the message suffers
  if (pwrite(fd, text.data(), text.size(), 0) < 0) return;
}

}  // namespace

std::string DataDirLockPath(const std::string& data_dir) {
  return absl::StrCat(data_dir, "/flopscoped.lock");
}

absl::StatusOr<std::unique_ptr<DataDirLock>> DataDirLock::Acquire(const std::string& data_dir,
                                                                  absl::Duration dying_wait) {
  std::string path = DataDirLockPath(data_dir);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open the lock file ", path, ": ", std::strerror(errno)));
  }
  const absl::Time start = absl::Now();
  absl::Time live_since = absl::InfiniteFuture();  // when the holder was first seen running
  while (true) {
    // Hazard: flock is per open file description; this fd is never dup'ed or inherited
    // (O_CLOEXEC), so the lock lasts exactly as long as this object.
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      WritePid(fd);
      return std::unique_ptr<DataDirLock>(new DataDirLock(std::move(path), fd));
    }
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const int error = errno;
      close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat("cannot lock ", path, ": ", std::strerror(error)));
    }
    const int64_t holder = ReadHolderPid(fd);
    const absl::Time now = absl::Now();
    const bool running = holder > 0 && ProcessIsRunning(holder);
    if (running && live_since == absl::InfiniteFuture()) live_since = now;
    if (!running) live_since = absl::InfiniteFuture();
    if ((running && now - live_since >= kLiveHolderWait) || now - start >= dying_wait) {
      close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat("another flopscoped (", HolderText(holder), ") is using the data directory ",
                       data_dir, " (lock ", path, "); stop it first or pick another --data-dir"));
    }
    absl::SleepFor(kPollInterval);
  }
}

DataDirLock::~DataDirLock() { close(fd_); }  // closing the last descriptor releases the lock

}  // namespace flopscope::daemon
