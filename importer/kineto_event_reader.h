#pragma once

#include <simdjson.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "importer/trace_recording.h"

namespace flopscope::importer {

// Turns one Kineto trace event (JSON text of one object) into what TraceRecording keeps:
//   kernel / gpu_memcpy / gpu_memset (legacy Kernel / Memcpy / Memset) -> GpuActivity
//   cuda_runtime / cuda_driver (legacy Runtime) with a correlation      -> LaunchSite
//   python_function "nn.Module: X"                                      -> module range X
//   user_annotation; legacy Operator named like a step or phase         -> annotation range
//   gpu_user_annotation                                                 -> GPU annotation range
//   cuda_profiler_range                                                 -> CounterSample
// and ignores the rest (cpu_op, flows, metadata, instant events). Each event is parsed whole by
// simdjson's DOM parser, which validates it completely: a malformed event is an error, never
// half-read. DOM per event, rather than On-Demand over the whole document, because On-Demand
// needs the whole (decompressed) document in memory and only checks what it visits; an event is
// a few hundred bytes, so the DOM costs little (bench/import_throughput measures it).
class KinetoEventReader {
 public:
  explicit KinetoEventReader(TraceRecording* recording) : recording_(recording) {}

  // Errors name the event's offset and the problem.
  absl::Status Read(absl::string_view json, uint64_t offset);

  bool saw_legacy_categories() const { return saw_legacy_; }

 private:
  enum class Category : uint8_t {
    kIgnored,
    kKernel,
    kMemcpy,
    kMemset,
    kRuntime,
    kPythonFunction,
    kAnnotation,
    kLegacyOperator,
    kGpuAnnotation,
    kCounterRange,
  };
  struct Interval {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
  };

  Category Classify(absl::string_view category);
  static bool Matters(Category category, absl::string_view name);
  absl::Status Dispatch(simdjson::dom::element event, Category category, absl::string_view name,
                        const Interval& at, uint64_t offset);
  void NotePid(simdjson::dom::element event);
  absl::Status ReadInterval(absl::string_view json, simdjson::dom::element event, uint64_t offset,
                            Interval* interval);
  absl::Status ReadActivity(simdjson::dom::element event, Category category, const Interval& at,
                            uint64_t offset);
  void ReadLaunch(simdjson::dom::element event, absl::string_view name, int64_t time_ns);
  void ReadRange(simdjson::dom::element event, RangeOrigin origin, absl::string_view name,
                 const Interval& at);
  void ReadCounterSample(simdjson::dom::element event, absl::string_view name, const Interval& at);
  uint32_t InternName(absl::string_view name, size_t max_bytes);

  TraceRecording* recording_;
  simdjson::dom::parser parser_;
  std::vector<char> padded_;  // the event copied with simdjson's required padding
  bool saw_legacy_ = false;
};

}  // namespace flopscope::importer
