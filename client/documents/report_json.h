#pragma once

#include <functional>
#include <string>

#include "common/json/json_writer.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// `flopscope report --format json`. The shape is a contract for scripts and tests:
//   {
//     "job": "<id>",
//     "ranks": [{"rank": 0, "host": "...", "pid": 123, "gpu_status": "...",
//                "devices": [{"index": 0, "name": "...", "chip": "GH100", "sm_count": n,
//                             "sm_clock_khz": n, "memory_bytes": n, "compute_capability": 90,
//                             "uuid": "GPU-..."}],
//                "losses": {"<cause>": n}}],
//     "modules": [{"path": "A/b", "calls": n, "cpu_time_s": x, "gpu_time_s": x|null,
//                  "kernels": n, "gpu_span_s": x|null, "gpu_busy_s": x|null,
//                  "memcpy": {"count": n, "time_s": x, "bytes": n}, "memset": {...},
//                  "flops": x|null, "params": n|null,
//                  "flops_by_precision": [{"precision": "fp32", "flops": x}],
//                  "counted_steps": n, "counted_kernels": n}],   // depth-first
//     "phases": [{"name": "step", "calls": n, "cpu_time_s": x, "min_s": x, "max_s": x,
//                 "median_s": x, "flops": x|null, "flops_by_precision": [...]}],
//     "losses": {"<cause>": n},   // summed over the included ranks
//     "counter_windows": [{"rank": n, "first_step": n, "last_step": n, "trigger": "",
//                          "metric_set": "", "chip": "", "passes": n, "kernels_counted": n,
//                          "ranges_unmatched": n, "start_ns": n, "end_ns": n, "status": ""}],
//     "fp16_convention": "",
//     "top_kernels_of": "A/b",    // these two only with `--kernels`
//     "top_kernels": [{"name": "_Z...", "demangled": "...", "kind": "kernel"|"memcpy"|"memset",
//                      "count": n, "total_s": x, "min_s": x, "max_s": x, "bytes": n}]
//   }
// One unit per kind: durations in seconds (doubles, keys "*_s"), timestamps in integer
// nanoseconds since the clock's epoch (keys "*_ns"). gpu_time_s and kernels count kernels only;
// memory copies and sets are apart. `flops` (modules and phases) is counted FLOPs per counted
// step summed over the ranks, split by precision largest first ("fp64", "fp32", "fp16",
// "tensor:<source>").
// null marks what the daemon does not know (the proto's optional fields left unset); `kernels`
// has no such state in the proto and is always a number. Causes are LossCauseName()s
// ("buffer_full", ...). Integers are exact (int64/uint64 as JSON integers).
// The version of the JSON `flopscope report --format json` writes (docs/report.schema.json).
// Raised when a key changes meaning or goes away; new keys keep the version.
// 4: profile.modules[].flops (and macs, flops_per_s) is the forward pass's where the counters split
// a module's FLOPs by pass (all_passes_flops, bwd_flops beside it).
inline constexpr int kReportSchemaVersion = 4;

std::string RenderReportJson(const flopscope::v1::Report& report);

// The same document with more top-level keys, written by `extend` after "losses" (the
// DeepSpeed-style "profile", see profile_export.h).
std::string RenderReportJson(const flopscope::v1::Report& report,
                             const std::function<void(JsonWriter&)>& extend);

}  // namespace flopscope::client
