#pragma once

#include <functional>
#include <optional>
#include <string>
#include <variant>

#include "client/trace_export/trace_definitions.h"
#include "common/nvtx_vocabulary.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// What both export formats say about a record, so that they say the same.

// A range of the `flopscope` domain: a step or a phase, which the injector keeps on a stack of
// its own, so it gets a track of its own beside the module ranges.
bool IsStepOrPhase(const TraceDefinitions::Path& path);

// "rank 0 (node1, pid 4242)" for the process of a chunk that names its session.
std::string ProcessName(const v1::TraceChunk& chunk);

// "GPU 0 stream 7".
std::string StreamName(const v1::KernelRecord& kernel);
// `name` for lane 0, "<name> (overlap N)" for lane N (lanes.h).
std::string LaneName(const std::string& name, uint32_t lane);

using ActivityValue = std::variant<std::string, double, uint64_t>;
// The activity's arguments beyond name, module, key and correlation id: "grid" and "block"
// ("x,y,z", kernels only), "bytes" (memcpy, memset), "graph" (launched from a CUDA graph),
// "counted" (1: launched in a counter window), and its counted FLOPs: "flops" (all precisions)
// and "flops:fp64", "flops:fp32", "flops:fp16", "flops:tensor:<source>" where not zero.
void ForEachActivityField(
    const v1::TraceActivity& activity,
    const std::function<void(const std::string& name, const ActivityValue& value)>& on_field);

// All counted FLOPs of the activity.
double TotalFlops(const v1::FlopCounters& flops);
// Counted FLOPs over the activity's duration, per second; nullopt without FLOPs or duration.
std::optional<double> FlopsPerSecond(const v1::TraceActivity& activity);

}  // namespace flopscope::client
