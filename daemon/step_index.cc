#include "daemon/step_index.h"

#include <algorithm>

namespace flopscope::daemon {

StepIndex::StepIndex(std::vector<StepSpan> steps) : steps_(std::move(steps)) {
  std::sort(steps_.begin(), steps_.end(), [](const StepSpan& a, const StepSpan& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns < b.end_ns;
  });
}

int64_t StepIndex::StepAt(int64_t time_ns) const {
  // The last step starting at or before the moment is the only one that can hold it.
  auto after =
      std::upper_bound(steps_.begin(), steps_.end(), time_ns,
                       [](int64_t time, const StepSpan& step) { return time < step.start_ns; });
  if (after == steps_.begin()) return -1;
  const auto candidate = std::prev(after);
  return time_ns <= candidate->end_ns ? candidate - steps_.begin() : -1;
}

}  // namespace flopscope::daemon
