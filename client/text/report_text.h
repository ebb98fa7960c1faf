#pragma once

#include <string>

#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// `flopscope report` for a terminal: a header (job, ranks with host, pid and GPUs, announced
// facts, lost records by cause, why there are no GPU records when there are none, activities
// whose launch was not seen), the module tree indented by depth (calls, CPU time total and per
// call; GPU time, GPU span and busy time, kernels, FLOPs and params as columns only when some
// module has them; "-" where one is unknown), memory copies and sets apart, the top GPU
// activities of a module when the report carries them (`--kernels`), then steps and phases.
std::string RenderReportText(const flopscope::v1::Report& report);

// What was dropped, one line each when there is any: the records the producers counted as lost
// ("Lost records: ...") and the batches the daemon refused ("Rejected by daemon: ...", counted
// by the daemon, by rule). "" when nothing was. For views that have no header of their own.
std::string RenderDropsText(const flopscope::v1::Report& report);

// `flopscope report --kernels PATH`: the job line and the top GPU activities of the module
// (kernels by demangled name, memcpy and memset): calls, total, share, mean, min, max, bytes.
std::string RenderTopKernelsText(const flopscope::v1::Report& report);

}  // namespace flopscope::client
