#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "flopscope/v1/records.pb.h"
#include "importer/string_pool.h"

namespace flopscope::importer {

// What a reader (Kineto JSON, Nsight Systems SQLite) took from one file, in a compact form that
// both share, before any attribution. Times are nanoseconds on the trace's own clock; the time
// base that makes them Unix-epoch nanoseconds is chosen later (time_base.h), once the whole span
// is known. Only what the import needs is kept, so memory follows the kernel and module counts,
// not the file size.

// Where a range came from; it decides how RangeNester classifies it.
enum class RangeOrigin : uint8_t {
  kPythonModule,   // Kineto python_function "nn.Module: <Class>_<n>": always a module
  kAnnotation,     // Kineto user_annotation, NVTX push/pop: a step, a phase or a module
  kGpuAnnotation,  // Kineto gpu_user_annotation: on a stream's timeline, not a thread's
  kStartEnd,       // NVTX start/end: process-scoped, may end on another thread
};

// Keys of the timelines ranges and launches live on. CPU threads use their OS thread id; GPU
// annotations use their stream, marked by the top bit so the two can never collide.
inline constexpr uint64_t kStreamKeyBit = uint64_t{1} << 63;
inline uint64_t StreamKey(uint32_t device, uint32_t stream) {
  return kStreamKeyBit | (static_cast<uint64_t>(device) << 32) | stream;
}

struct RawRange {
  uint64_t thread = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t name = 0;    // StringPool id
  uint32_t domain = 0;  // StringPool id; 0 (the empty string) is NVTX's default domain
  RangeOrigin origin = RangeOrigin::kAnnotation;
  uint64_t external_id = 0;  // Kineto "External id": pairs a GPU annotation with its CPU one
};

// The CPU side of a GPU activity: the API call that launched it, found by correlation id.
struct LaunchSite {
  uint64_t thread = 0;
  int64_t time_ns = 0;
  bool launches_kernel = false;  // cudaLaunchKernel, cuLaunchKernelEx, ... (ordinal joins)
};

struct GpuActivity {
  v1::ActivityKind kind = v1::ACTIVITY_KIND_KERNEL;
  uint64_t correlation_id = 0;
  uint32_t name = 0;  // StringPool id; kernels only
  uint32_t device = 0;
  uint32_t context = 0;
  uint32_t stream = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint64_t bytes = 0;
  uint64_t graph_id = 0;
  uint64_t graph_node_id = 0;
};

// A Kineto `cuda_profiler_range`: one kernel's CUPTI counter values (auto-range profiling).
struct CounterSample {
  uint32_t name = 0;  // the kernel's name, StringPool id
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::vector<std::pair<uint32_t, double>> counters;  // metric name (StringPool id), value
};

// A `key=value` fact from the trace itself (NVTX marks in the flopscope domain).
struct TraceMark {
  std::string key;
  std::string value;
  int64_t time_ns = 0;
};

struct TraceRecording {
  std::string path;
  std::string format;          // "kineto-json", "kineto-json-legacy", "nsys-sqlite"
  std::string format_version;  // Kineto schemaVersion, Nsight EXPORT_SCHEMA_VERSION
  StringPool strings;
  std::vector<RawRange> ranges;
  absl::flat_hash_map<uint64_t, LaunchSite> launches;  // by correlation id
  std::vector<GpuActivity> activities;
  std::vector<CounterSample> counter_samples;
  std::vector<TraceMark> marks;
  std::vector<v1::Device> devices;

  std::optional<int32_t> rank;  // from the trace (distributedInfo), if it says
  int32_t world_size = 0;       // 0 when unknown
  int64_t pid = 0;
  std::string host;

  // Kineto's baseTimeNanoseconds, or Nsight's session start (then `base_is_required`: its
  // timestamps count from the session start and mean nothing without it).
  std::optional<int64_t> base_time_ns;
  bool base_is_required = false;

  uint64_t content_digest = 0;      // of the file's bytes: makes re-imports idempotent
  uint64_t bytes_read = 0;          // decompressed bytes (JSON) or file size (SQLite)
  uint64_t events_read = 0;         // trace events (JSON) or rows (SQLite) looked at
  uint64_t negative_durations = 0;  // clamped to 0
  uint64_t unclosed_ranges = 0;     // NVTX ranges without an end, left out
};

// How far a reader got through its file: bytes of the file consumed, of its total size.
using ProgressCallback = std::function<void(uint64_t done_bytes, uint64_t total_bytes)>;

}  // namespace flopscope::importer
