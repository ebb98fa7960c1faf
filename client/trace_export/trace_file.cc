// Streamed output files for `flopscope export` (see trace_file.h).
#include "client/trace_export/trace_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace flopscope::client {

TraceFile::~TraceFile() {
  if (file_ == nullptr) return;
  std::fclose(file_);
  std::remove(temp_path_.c_str());
}

absl::Status TraceFile::Failed(const char* what) {
  const int error = errno;
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  std::remove(temp_path_.c_str());
  return absl::UnavailableError(
      absl::StrCat("cannot ", what, " ", path_, ": ", std::strerror(error)));
}

absl::Status TraceFile::Open(const std::string& path) {
  path_ = path;
  temp_path_ = absl::StrCat(path, ".partial-", getpid());
  file_ = std::fopen(temp_path_.c_str(), "wb");
  if (file_ == nullptr) return Failed("write");
  return absl::OkStatus();
}

absl::Status TraceFile::Write(std::string_view bytes) {
  if (file_ == nullptr) return absl::FailedPreconditionError("trace file not open");
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) return Failed("write");
  bytes_ += bytes.size();
  return absl::OkStatus();
}

absl::Status TraceFile::Close() {
  if (file_ == nullptr) return absl::FailedPreconditionError("trace file not open");
  if (std::fflush(file_) != 0) return Failed("write");
  if (std::fclose(file_) != 0) {
    file_ = nullptr;
    return Failed("write");
  }
  file_ = nullptr;
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) return Failed("rename into");
  return absl::OkStatus();
}

}  // namespace flopscope::client
