#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "importer/trace_recording.h"

namespace flopscope::importer {

enum class TraceFormat { kKinetoJson, kNsysSqlite };

// What a file holds, from its first bytes (not its name): the gzip magic or '{' / '[' after
// optional whitespace is a Kineto JSON trace, "SQLite format 3" an Nsight Systems export.
// INVALID_ARGUMENT naming what was expected for anything else.
absl::StatusOr<TraceFormat> DetectTraceFormat(const std::string& path);

// Reads one file of either format. Errors are prefixed with the file's path.
absl::StatusOr<TraceRecording> ReadTrace(const std::string& path, const ProgressCallback& progress);

}  // namespace flopscope::importer
