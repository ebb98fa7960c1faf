#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/nvtx_vocabulary.h"

namespace flopscope::daemon {

// The position of the last of `spans` (sorted by start_ns) that starts at or before `time_ns`;
// -1 when none does. `hint` carries the answer from one call to the next: moments asked for in
// time order (range events come in commit order, close to it) are answered from it, or from the
// span after it, without a binary search.
template <typename Span>
int64_t LastStartingAtOrBefore(const std::vector<Span>& spans, int64_t time_ns, size_t* hint) {
  const auto holds = [&](size_t at) {
    return at < spans.size() && spans[at].start_ns <= time_ns &&
           (at + 1 == spans.size() || spans[at + 1].start_ns > time_ns);
  };
  if (holds(*hint)) return static_cast<int64_t>(*hint);
  if (holds(*hint + 1)) return static_cast<int64_t>(++*hint);
  auto after = std::upper_bound(spans.begin(), spans.end(), time_ns,
                                [](int64_t t, const Span& span) { return t < span.start_ns; });
  if (after == spans.begin()) return -1;
  *hint = static_cast<size_t>(after - spans.begin()) - 1;
  return static_cast<int64_t>(*hint);
}

// A step range of one rank: an occurrence of `step` in the `flopscope` NVTX domain.
struct StepSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// The steps a report asks for, by step number (inclusive); no `last`: to the last step.
struct StepWindowRequest {
  int64_t first = 0;
  std::optional<int64_t> last;
};

// The steps of one rank, numbered 0, 1, ... in start order over all of its sessions (a rank that
// restarted goes on counting), as the injector numbers the steps of one process; overlapping
// step ranges (two threads) make one step, as they do in the injector. Places a moment
// in the step whose range holds it. Steps of one rank follow one another, so only the step that
// started last at or before a moment can hold it.
class StepIndex {
 public:
  explicit StepIndex(std::vector<StepSpan> steps);

  int64_t size() const { return static_cast<int64_t>(steps_.size()); }
  const StepSpan& at(int64_t step) const { return steps_[static_cast<size_t>(step)]; }
  // The number of the step whose range holds `time_ns` (start <= time <= end); -1 when none does.
  int64_t StepAt(int64_t time_ns) const;
  // The same, fast for moments asked for in time order (LastStartingAtOrBefore).
  int64_t StepAt(int64_t time_ns, size_t* hint) const;

 private:
  std::vector<StepSpan> steps_;  // by start, then end
};

}  // namespace flopscope::daemon
