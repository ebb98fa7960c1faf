#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace flopscope::importer {

// Names in third-party traces are untrusted: the daemon rejects text that is not UTF-8, holds a
// NUL byte or is longer than its limits (daemon/validate/batch_validator.h). Rather than reject a
// whole recording for one odd name, the importer stores a cleaned copy: every ill-formed byte
// sequence and every NUL becomes U+FFFD, and the result is cut to at most `max_bytes` on a
// character boundary.
std::string CleanText(absl::string_view text, size_t max_bytes);

// Limits the daemon enforces (kept equal to daemon/validate/batch_validator.h, which this library
// does not link).
inline constexpr size_t kMaxNameBytes = 4096;
inline constexpr size_t kMaxStringBytes = 65536;
inline constexpr size_t kMaxMetadataKeyBytes = 1024;
inline constexpr size_t kMaxMetadataValueBytes = 65536;

}  // namespace flopscope::importer
