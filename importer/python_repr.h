#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flopscope::importer {

// Kineto sometimes stores `deviceProperties` and `distributedInfo` as a string holding Python's
// repr() of the value instead of the value itself: `[{'id': 0, 'name': 'NVIDIA A100', ...}]`.
// This rewrites such text as JSON: quotes (either kind) become double quotes with JSON escapes,
// True/False/None become true/false/null, tuples become arrays, inf/nan become null and the
// trailing comma of a one-element tuple is dropped. Text that is already JSON comes out equal.
// INVALID_ARGUMENT for an unterminated string or an identifier Python's repr never writes.
absl::StatusOr<std::string> PythonReprToJson(absl::string_view repr);

}  // namespace flopscope::importer
