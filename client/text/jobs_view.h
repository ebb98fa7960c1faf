#pragma once

#include <string>

#include "absl/time/time.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// `flopscope jobs`: one line per job (id, ranks, connected sessions, range events, kernels, lost
// records, last seen in `zone`), or a hint on how to record one when there are none.
std::string RenderJobsText(const flopscope::v1::ListJobsResponse& jobs, absl::TimeZone zone);

// `flopscope jobs --format json`:
//   {"jobs": [{"job": "<id>", "ranks": n, "connected": n, "ranges": n, "kernels": n, "lost": n,
//              "first_seen_ns": n, "last_seen_ns": n}]}
std::string RenderJobsJson(const flopscope::v1::ListJobsResponse& jobs);

}  // namespace flopscope::client
