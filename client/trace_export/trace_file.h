#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace flopscope::client {

// A file written as a stream (an export may be far larger than memory) beside its final name
// and renamed into place by Close(), as WriteOutput does for small outputs: a failed export
// leaves any earlier file untouched and no partial one behind. Errors name the path.
class TraceFile {
 public:
  TraceFile() = default;
  ~TraceFile();  // an unclosed file is removed
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;

  absl::Status Open(const std::string& path);
  absl::Status Write(std::string_view bytes);
  absl::Status Close();

  uint64_t bytes_written() const { return bytes_; }

 private:
  absl::Status Failed(const char* what);

  std::string path_;
  std::string temp_path_;
  std::FILE* file_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace flopscope::client
