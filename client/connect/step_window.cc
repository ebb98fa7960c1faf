// The steps a query asks the daemon for (see step_window.h).
#include "client/connect/step_window.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace flopscope::client {

absl::StatusOr<std::optional<StepWindow>> ParseStepWindow(const std::string& text) {
  if (text.empty()) return std::nullopt;
  auto invalid = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("--steps '", text,
                     "' is not a step window (use A:B, A:, :B or A; steps are numbered from 0)"));
  };
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.size() > 2) return invalid();
  // Digits only: SimpleAtoi alone would also take signs and surrounding blanks.
  auto step = [](const std::string& part, int64_t* value) {
    return !part.empty() && std::all_of(part.begin(), part.end(), absl::ascii_isdigit) &&
           absl::SimpleAtoi(part, value);
  };
  StepWindow window;
  if (parts.size() == 1) {
    if (!step(parts[0], &window.first)) return invalid();
    window.last = window.first;
    return window;
  }
  if (parts[0].empty() && parts[1].empty()) return invalid();
  if (!parts[0].empty() && !step(parts[0], &window.first)) return invalid();
  if (!parts[1].empty()) {
    int64_t last = 0;
    if (!step(parts[1], &last)) return invalid();
    if (last < window.first) {
      return absl::InvalidArgumentError(absl::StrCat("--steps '", text, "' ends before it starts"));
    }
    window.last = last;
  }
  return window;
}

}  // namespace flopscope::client
