#pragma once

#include "absl/status/status.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// A trace format being written: takes Query.GetTrace's chunks in the order they come and writes
// them out as it goes (perfetto_writer, chrome_writer).
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  // A chunk with `problem` set names a rank whose file could not be read: it is skipped.
  virtual absl::Status Add(const v1::TraceChunk& chunk) = 0;
  // Ends the file's structure (nothing more is added after it).
  virtual absl::Status Finish() = 0;
};

}  // namespace flopscope::client
