#include "injector/ranges/step_tracker.h"

#include <algorithm>

#include "common/nvtx_vocabulary.h"

namespace flopscope::injector {

void StepTracker::Opened(std::string_view name, uint64_t path_id, uint64_t instance_id) noexcept {
  try {
    MutexLock lock(&mutex_);
    const bool is_step = name == kStepRange;
    open_.push_back(Open{instance_id, path_id, is_step});
    PublishPhaseLocked();
    if (!is_step || open_steps_++ > 0) return;
    const int64_t step = next_step_++;
    step_.store(step, std::memory_order_relaxed);
    if (listener_ != nullptr) listener_->OnStepBegin(step);
  } catch (...) {
    // Out of memory growing the list: this range is not followed; steps stay consistent since
    // its close finds nothing.
  }
}

void StepTracker::Closed(uint64_t instance_id) noexcept {
  MutexLock lock(&mutex_);
  // Usually the innermost; ranges of several threads interleave, so search from the inside.
  auto it = std::find_if(open_.rbegin(), open_.rend(), [instance_id](const Open& open) {
    return open.instance_id == instance_id;
  });
  if (it == open_.rend()) return;
  const bool is_step = it->is_step;
  open_.erase(std::next(it).base());
  PublishPhaseLocked();
  if (!is_step || --open_steps_ > 0) return;
  const int64_t step = step_.exchange(-1, std::memory_order_relaxed);
  if (listener_ != nullptr) listener_->OnStepEnd(step);
}

int64_t StepTracker::steps_begun() const noexcept {
  MutexLock lock(&mutex_);
  return next_step_;
}

void StepTracker::PublishPhaseLocked() {
  phase_path_id_.store(open_.empty() ? 0 : open_.back().path_id, std::memory_order_relaxed);
}

}  // namespace flopscope::injector
