#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flopscope::client {

// The LD_PRELOAD value that loads `library` first, followed by whatever `existing` already
// preloads, in order (the dynamic loader accepts ':' and ' ' as separators; the result uses ':').
// A copy of `library` already in the list is removed, so it is never loaded twice.
// INVALID_ARGUMENT when `library` holds a separator, since LD_PRELOAD could not express it.
absl::StatusOr<std::string> PrependToLdPreload(absl::string_view existing,
                                               absl::string_view library);

}  // namespace flopscope::client
