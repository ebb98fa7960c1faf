#include "daemon/server/socket_file.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace flopscope::daemon {
namespace {

constexpr size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;
// 25 x 20 ms: how long a socket that answers gets to go away before it counts as served.
constexpr int kLiveSocketAttempts = 25;
constexpr useconds_t kLiveSocketPollMicros = 20000;

// The socket's directory, created 0755 when missing: every user's job must reach the socket
// (0666), and who may do what is decided per call (daemon/access/access_policy.h). An existing
// directory keeps its mode: the operator's choice.
absl::Status EnsureSocketDirectory(const std::string& dir) {
  std::error_code error;
  if (std::filesystem::is_directory(dir, error)) return absl::OkStatus();
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create the socket directory ", dir, ": ", error.message(),
                     " (run flopscoped as root for the node socket, or pick one with --socket)"));
  }
  if (chmod(dir.c_str(), 0755) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot set mode 0755 on ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

bool SocketIsLive(const std::string& path) {
  if (path.size() > kMaxSocketPath) return false;
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  const bool live = connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return live;
}

absl::Status PrepareSocketPath(const std::string& path) {
  if (path.empty() || path.size() > kMaxSocketPath) {
    return absl::FailedPreconditionError(
        absl::StrCat("socket path '", path, "' must be 1 to ", kMaxSocketPath,
                     " bytes long (pick a shorter one with --socket)"));
  }
  const std::string parent = std::filesystem::path(path).parent_path().string();
  if (!parent.empty()) {
    if (absl::Status s = EnsureSocketDirectory(parent); !s.ok()) return s;
  }
  struct stat info;
  if (lstat(path.c_str(), &info) != 0) return absl::OkStatus();  // nothing there: fine
  if (!S_ISSOCK(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing to replace ", path, ": it exists and is not a socket"));
  }
  // The caller holds its data directory's lock, so a daemon of that directory is gone; one dying
  // may still close this socket a moment after its lock, hence the short grace.
  for (int attempt = 0; SocketIsLive(path); ++attempt) {
    if (attempt == kLiveSocketAttempts) {
      return absl::FailedPreconditionError(
          absl::StrCat("another flopscoped is already serving ", path));
    }
    usleep(kLiveSocketPollMicros);
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot remove the stale socket ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace flopscope::daemon
