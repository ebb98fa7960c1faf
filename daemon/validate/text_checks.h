#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace flopscope::daemon {

enum class EmptyText { kAllowed, kRejected };

// Why `text` cannot be stored as a name or value, or "" when it can: longer than `max_bytes`,
// empty (when rejected), not UTF-8 (common/utf8.h: no overlong forms, no surrogates, nothing past
// U+10FFFF), or holding a NUL byte (which would cut C strings short). The daemon rejects rather
// than repairs: protobuf checks UTF-8 when parsing from the wire, but batches also come from
// importers and benchmarks that build messages in memory.
std::string TextProblem(absl::string_view text, size_t max_bytes, EmptyText empty);

}  // namespace flopscope::daemon
