#pragma once

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "flopscope/v1/records.pb.h"
#include "importer/trace_recording.h"

namespace flopscope::importer {

// Kineto's `cuda_profiler_range` events carry one kernel's CUPTI counters each, in launch order
// (CUPTI auto-range profiling numbers its ranges by launch) but without a correlation id. This
// joins them to kernels and turns the counters into FLOPs (common/flop_formulas.h):
//   - the trace has kernel records: sample i goes to kernel i in start order, but only when the
//     counts agree and every name matches (or is "__missing__"); otherwise none is joined;
//   - the trace has none (a counter-only run): each sample becomes a kernel record of its own,
//     named and timed by the sample (those times are the profiler's, not the kernel's), and
//     takes the correlation id of the i-th kernel-launch API call when the counts agree, which
//     is what attributes it to a module.
// FlopCounters keep every raw counter for audit.
class CounterJoiner {
 public:
  struct Result {
    std::string how;  // metadata import.counter_join; empty when there were no samples
    uint64_t joined = 0;
    uint64_t unmatched = 0;
  };

  static Result Join(TraceRecording* recording,
                     absl::flat_hash_map<size_t, v1::FlopCounters>* flops);

  // The FLOPs of one sample's counters.
  static v1::FlopCounters FlopsOf(const TraceRecording& recording, const CounterSample& sample);
};

}  // namespace flopscope::importer
