#include "daemon/store/step_index.h"

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
  size_t hint = 0;
  return StepAt(time_ns, &hint);
}

int64_t StepIndex::StepAt(int64_t time_ns, size_t* hint) const {
  // The last step starting at or before the moment is the only one that can hold it.
  const int64_t candidate = LastStartingAtOrBefore(steps_, time_ns, hint);
  if (candidate < 0) return -1;
  return time_ns <= steps_[static_cast<size_t>(candidate)].end_ns ? candidate : -1;
}

}  // namespace flopscope::daemon
