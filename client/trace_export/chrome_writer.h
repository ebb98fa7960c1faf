#pragma once

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "client/trace_export/lanes.h"
#include "client/trace_export/trace_definitions.h"
#include "client/trace_export/trace_file.h"
#include "client/trace_export/trace_sink.h"
#include "common/json/json_writer.h"

namespace flopscope::client {

// Writes the Chrome trace-event JSON (chrome://tracing, older tools; Perfetto reads it too) as
// GetTrace's chunks come, one event at a time through the project's JsonWriter:
//   {"displayTimeUnit": "ns", "baseTimeNanoseconds": B, "traceEvents": [...]}
// `ts` and `dur` are microseconds since B (whole seconds, an hour before the first session
// started: doubles keep nanoseconds that way, which they cannot for epoch microseconds).
//   - `M` metadata: process_name per rank (pid = rank + 1, as in the Perfetto export),
//     thread_name per thread, "steps & phases (thread T)" (tid 2^29 + T), "start/end ranges"
//     (tid 2^28 + lane) and "GPU d stream s" (tid 2^30 + lane * 2^24 + d * 2^16 + s), where
//     slices that overlap on one timeline take further lanes ("... (overlap N)": lanes.h);
//   - `X` events: every range (cat "range" or "phase", args path and instance) and every activity
//     (cat "kernel", "memcpy" or "memset"; args as the Perfetto export's annotations);
//   - flows `s` (at the range's start) / `f` (binding the activity), cat "launch", one per
//     activity whose range lists it;
//   - `C` counters "step time" (ms) and "achieved FLOPS" as in the Perfetto export.
class ChromeWriter final : public TraceSink {
 public:
  explicit ChromeWriter(TraceFile& out) : out_(out) {}

  absl::Status Add(const v1::TraceChunk& chunk) override;
  absl::Status Finish() override;

 private:
  void AddRange(const v1::TraceChunk& chunk, const v1::TraceRange& range);
  void AddActivity(const v1::TraceChunk& chunk, const v1::TraceActivity& activity);
  void AddCounter(int32_t rank, const char* name, const char* unit, int64_t at_ns, double value);
  void NameProcess(const v1::TraceChunk& chunk);
  void NameThread(int32_t rank, uint64_t tid, const std::string& name);

  // The writer of one event, begun with its common fields.
  JsonWriter& BeginEvent(const char* phase, int32_t rank, uint64_t tid);
  void EndEvent();
  double Micros(int64_t ns) const;

  TraceFile& out_;
  absl::Status status_;
  TraceDefinitions definitions_;
  JsonWriter event_{0};
  bool started_ = false;
  bool any_event_ = false;
  int64_t base_ns_ = 0;
  absl::flat_hash_set<int32_t> named_processes_;
  absl::flat_hash_set<std::pair<int32_t, uint64_t>> named_threads_;
  Lanes lanes_;
};

}  // namespace flopscope::client
