#pragma once

#include <string>

#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// `flopscope report --format json`. The shape is a contract for scripts and tests:
//   {
//     "job": "<id>",
//     "ranks": [{"rank": 0, "host": "...", "pid": 123, "gpu_status": "...",
//                "losses": {"<cause>": n}}],
//     "modules": [{"path": "A/b", "calls": n, "cpu_time_ns": n, "gpu_time_ns": n|null,
//                  "kernels": n, "flops": x|null, "params": n|null}],   // depth-first
//     "phases": [{"name": "step", "calls": n, "cpu_time_ns": n, "min_ns": n, "max_ns": n}],
//     "losses": {"<cause>": n}   // summed over the included ranks
//   }
// null marks what the daemon does not know (the proto's optional fields left unset); `kernels`
// has no such state in the proto and is always a number. Causes are LossCauseName()s
// ("buffer_full", ...). Integers are exact (int64/uint64 as JSON integers).
std::string RenderReportJson(const flopscope::v1::Report& report);

}  // namespace flopscope::client
