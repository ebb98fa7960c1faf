#include "daemon/step_index.h"

#include <algorithm>

namespace flopscope::daemon {

StepIndex::StepIndex(std::vector<StepSpan> steps) : steps_(std::move(steps)) {
  std::sort(steps_.begin(), steps_.end(), [](const StepSpan& a, const StepSpan& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns < b.end_ns;
  });
  // Step ranges that overlap (opened on two threads of one process) are one step, as the
  // injector counts them (a step begins when a `step` range opens while none is open).
  std::vector<StepSpan> merged;
  merged.reserve(steps_.size());
  for (const StepSpan& step : steps_) {
    // Strictly: a step opening the very nanosecond the previous one closed is the next step.
    if (!merged.empty() && step.start_ns < merged.back().end_ns) {
      merged.back().end_ns = std::max(merged.back().end_ns, step.end_ns);
    } else {
      merged.push_back(step);
    }
  }
  steps_ = std::move(merged);
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
