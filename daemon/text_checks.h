#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace flopscope::daemon {

// True when `text` is well-formed UTF-8 (no overlong forms, no surrogates, nothing past
// U+10FFFF). Protobuf checks this when parsing from the wire, but batches also come from
// importers and benchmarks that build messages in memory.
bool IsValidUtf8(absl::string_view text);

enum class EmptyText { kAllowed, kRejected };

// Why `text` cannot be stored as a name or value, or "" when it can: longer than `max_bytes`,
// empty (when rejected), not UTF-8, or holding a NUL byte (which would cut C strings short).
std::string TextProblem(absl::string_view text, size_t max_bytes, EmptyText empty);

}  // namespace flopscope::daemon
