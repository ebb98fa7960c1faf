#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace flopscope::daemon {

// The range that marks a step, in the `flopscope` NVTX domain (DESIGN: Time).
inline constexpr char kStepRange[] = "step";
// The phases of the `flopscope` domain that split a module's time into its passes.
inline constexpr char kForwardPhase[] = "forward";
inline constexpr char kBackwardPhase[] = "backward";

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

 private:
  std::vector<StepSpan> steps_;  // by start, then end
};

}  // namespace flopscope::daemon
