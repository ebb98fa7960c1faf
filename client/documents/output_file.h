#pragma once

#include <string>

#include "absl/status/status.h"

namespace flopscope::client {

// Writes `text` to stdout when `path` is empty or "-", else to the file `path`. The file is
// written beside its final name and renamed into place, so a failure (full disk, bad directory)
// leaves any earlier file there untouched. Errors name the path and the reason.
absl::Status WriteOutput(const std::string& path, const std::string& text);

}  // namespace flopscope::client
