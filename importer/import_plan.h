#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "flopscope/v1/records.pb.h"
#include "importer/trace_recording.h"

namespace flopscope::importer {

// One closed range occurrence, ready to become a RangeEvent (times still on the trace clock).
struct PlannedRange {
  uint64_t path_id = 0;
  uint64_t instance_id = 0;
  uint64_t parent_instance_id = 0;
  uint64_t thread_id = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  v1::RangeKind kind = v1::RANGE_KIND_PUSH_POP;
};

// The module range a GPU activity belongs to; zeros for the root (unattributed).
struct Attribution {
  uint64_t path_id = 0;
  uint64_t instance_id = 0;
};

// Where a counted kernel was launched: the number of the step open on its launching thread (-1
// for none) and the innermost step or phase range (a `flopscope`-domain path; 0 for none).
struct CountedContext {
  int64_t step = -1;
  uint64_t phase_path_id = 0;
};

// What one file sends, per kind (the summary line and the import.* metadata).
struct ImportCounts {
  uint64_t ranges = 0;
  uint64_t kernels = 0;
  uint64_t memcpys = 0;
  uint64_t memsets = 0;
  uint64_t attributed_kernels = 0;
  uint64_t kernels_without_launch = 0;
  uint64_t kernels_with_flops = 0;
  double flops = 0;
};

// Everything one file becomes, before it is cut into batches (BatchStream): the session's
// hello, the range tree, the range occurrences, the GPU activities with their attribution and
// counted FLOPs (sent as KernelFlops records), metadata and losses. Times are on the trace clock;
// time_offset_ns turns them into Unix-epoch nanoseconds.
struct ImportPlan {
  v1::SessionHello hello;
  TraceRecording recording;  // activities and their names
  std::vector<v1::RangePath> paths;
  std::vector<PlannedRange> ranges;
  std::vector<Attribution> attributions;                // parallel to recording.activities
  absl::flat_hash_map<size_t, v1::FlopCounters> flops;  // by activity index
  // By activity index, for the counted kernels whose launch was found.
  absl::flat_hash_map<size_t, CountedContext> counted_context;
  std::vector<v1::Metadata> metadata;
  std::vector<v1::LossCounter> losses;
  int64_t time_offset_ns = 0;
  ImportCounts counts;
};

}  // namespace flopscope::importer
