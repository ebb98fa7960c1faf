#pragma once

#include <simdjson.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "importer/trace_recording.h"

namespace flopscope::importer {

// Reads the top-level members of a Kineto trace other than traceEvents: `deviceProperties` (the
// GPUs), `distributedInfo` (rank, world size), `baseTimeNanoseconds`, `schemaVersion` and a host
// name where one is recorded. deviceProperties and distributedInfo come as JSON or as a string
// holding JSON or Python's repr of the value; all three are accepted. Every member is parsed, so
// malformed JSON anywhere in the file is an error.
class KinetoHeader {
 public:
  explicit KinetoHeader(TraceRecording* recording) : recording_(recording) {}

  absl::Status Read(absl::string_view key, absl::string_view json, uint64_t offset);

 private:
  // The member's value, or the value a string member holds (JSON or Python repr).
  absl::Status Unwrap(absl::string_view key, simdjson::dom::element value, uint64_t offset,
                      simdjson::dom::element* unwrapped);
  absl::Status ReadDevices(simdjson::dom::element devices, uint64_t offset);
  absl::Status ReadDistributedInfo(simdjson::dom::element info, uint64_t offset);

  TraceRecording* recording_;
  simdjson::dom::parser parser_;
  simdjson::dom::parser inner_parser_;  // for values held inside strings
  std::vector<char> padded_;
  std::string inner_json_;
};

}  // namespace flopscope::importer
