#include "client/documents/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"

namespace flopscope::client {
namespace {

// The mode a plain open(O_CREAT, 0666) would give, so the report is as readable as any file the
// user creates (mkstemp's default is a private 0600). Reading the umask means setting it; nothing
// else in the client creates files, so the brief change cannot race.
mode_t DefaultFileMode() {
  const mode_t mask = umask(0);
  umask(mask);
  return 0666 & ~mask;
}

absl::Status WriteAll(int fd, const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "write");
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteOutput(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    if (!std::cout) return absl::UnavailableError("cannot write to standard output");
    return absl::OkStatus();
  }
  std::string temporary = path + ".tmp-XXXXXX";
  const int fd = mkstemp(temporary.data());
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create a file beside ", path));
  absl::Status status = WriteAll(fd, text);
  if (status.ok() && fchmod(fd, DefaultFileMode()) != 0)
    status = absl::ErrnoToStatus(errno, "chmod");
  if (close(fd) != 0 && status.ok()) status = absl::ErrnoToStatus(errno, "close");
  if (status.ok() && rename(temporary.c_str(), path.c_str()) != 0) {
    status = absl::ErrnoToStatus(errno, "rename");
  }
  if (!status.ok()) {
    unlink(temporary.c_str());
    return absl::Status(status.code(), absl::StrCat("cannot write ", path, ": ", status.message()));
  }
  return absl::OkStatus();
}

}  // namespace flopscope::client
