#pragma once

#include <string>

#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// `flopscope ranks JOB`: one line per rank — rank, host, pid, device, parallel coordinates,
// sessions, connected, range events, kernels, lost records — and below the table, once per
// distinct status, why ranks have no GPU records.
std::string RenderRanksText(const flopscope::v1::ListRanksResponse& ranks);

// `flopscope ranks JOB --format json`:
//   {"ranks": [{"rank": n, "host": "", "pid": n, "devices": [""], "tp_rank": n, "pp_rank": n,
//               "dp_rank": n, "world_size": n, "sessions": n, "connected": bool, "ranges": n,
//               "kernels": n, "lost": n, "gpu_status": ""}]}
std::string RenderRanksJson(const flopscope::v1::ListRanksResponse& ranks);

}  // namespace flopscope::client
