#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "importer/trace_recording.h"

namespace flopscope::importer {

// Reads a Kineto / PyTorch-profiler Chrome trace (.json or .json.gz, current or legacy category
// names) in one streaming pass: ByteSource (gunzip) -> JsonEventSplitter (cuts events) ->
// KinetoEventReader / KinetoHeader (simdjson per piece). Memory stays near one read chunk plus
// what TraceRecording keeps. Errors read "offset N: problem" (N in the decompressed stream); the
// caller adds the file name.
absl::StatusOr<TraceRecording> ReadKinetoTrace(const std::string& path,
                                               const ProgressCallback& progress);

}  // namespace flopscope::importer
