#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace flopscope::client {

// The steps a query asks the daemon for, as `report`, `diff` and `export` take them (--steps):
// "A:B" (steps A to B), "A:" (A to the last), ":B" (0 to B) or "A" (step A alone); steps are
// numbered from 0. "" -> nullopt (the whole run); anything else INVALID_ARGUMENT.
struct StepWindow {
  int64_t first = 0;
  std::optional<int64_t> last;
};
absl::StatusOr<std::optional<StepWindow>> ParseStepWindow(const std::string& text);

}  // namespace flopscope::client
