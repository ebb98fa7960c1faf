#pragma once

#include "absl/status/status.h"
#include "client/commands/query_commands.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::client {

// `flopscope report JOB --kernels PATH [--top-kernels N]`: the top GPU activities (kernels by
// name, memcpy and memset) of module PATH and its descendants, by total time, with demangled
// names; "/" for the whole job, "<unattributed>" for work launched with no module open.
// `request` already names the job and ranks. Text, or JSON with --format json (the report
// document with "top_kernels"). NOT_FOUND from the daemon for a path the report does not have.
absl::Status KernelsCommand(const ReportOptions& options, flopscope::v1::ReportRequest request);

}  // namespace flopscope::client
