#pragma once

#include <string>

#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// `flopscope report` for a terminal: a header (job, ranks with host and pid, announced facts,
// lost records by cause, and why there are no GPU records when there are none), the module tree
// indented by depth (calls, CPU time total and per call; GPU time, kernels, FLOPs and params as
// columns only when some module has them; "-" where one is unknown), then steps and phases.
std::string RenderReportText(const flopscope::v1::Report& report);

}  // namespace flopscope::client
