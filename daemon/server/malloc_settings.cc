#include "daemon/server/malloc_settings.h"

#include <malloc.h>

namespace flopscope::daemon {

FreedMemoryTrimmer::FreedMemoryTrimmer(absl::Duration period)
    : thread_([this, period] { Loop(period); }) {}

FreedMemoryTrimmer::~FreedMemoryTrimmer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

bool FreedMemoryTrimmer::TrimNow() {
#ifdef __GLIBC__
  return malloc_trim(0) == 1;
#else
  return false;
#endif
}

void FreedMemoryTrimmer::Loop(absl::Duration period) {
  while (true) {
    const bool released = TrimNow();  // outside the lock: it takes a few ms on a large heap
    absl::MutexLock lock(&mu_);
    ++passes_;
    if (released) ++released_;
    const auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stop), period)) return;
  }
}

uint64_t FreedMemoryTrimmer::passes() {
  absl::MutexLock lock(&mu_);
  return passes_;
}

uint64_t FreedMemoryTrimmer::released() {
  absl::MutexLock lock(&mu_);
  return released_;
}

}  // namespace flopscope::daemon
