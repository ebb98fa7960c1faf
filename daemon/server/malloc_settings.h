#pragma once

// Giving back to the system the memory the daemon's malloc holds free (issue 15: a 64-rank job
// took the daemon to ~1 GB resident while ~400 MB of it was in use).
//
// glibc serves each thread from one of up to 8 arenas per core (16 here), and what is freed in
// an arena stays resident until reused there. By default each large block freed also raises the
// mmap threshold to its size (up to 32 MiB), so the blocks of a few MiB the daemon frees all the
// time (a report's per-rank figures, a stream's buffers) soon all come from arenas:
// malloc_stats() at the peak showed 998 MB taken from the system, 404 MB in use.
//
// Fixing the threshold (mallopt) gave those blocks mappings of their own and more than halved
// the peak (0.39-0.44 GB), but made every report map and zero its temporaries again: 0.73-0.87 s
// instead of 0.44-0.62 s for a finished 4.8 M-event job. So the daemon keeps glibc's defaults
// and calls malloc_trim every kTrimPeriod instead: the pages of free chunks go back to the
// system (the chunks stay in their arenas). Every second measured 0.51-0.52 GB at the peak, but
// most reports then found their memory given back (0.68 s against 0.58 s); every 4 s measured
// 0.62-0.66 GB, and most reports run on memory still resident.

#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace flopscope::daemon {

// Calls malloc_trim(0) every `period` on a thread of its own, from construction until
// destruction. Without glibc it does nothing.
class FreedMemoryTrimmer {
 public:
  static constexpr absl::Duration kTrimPeriod = absl::Seconds(4);

  explicit FreedMemoryTrimmer(absl::Duration period = kTrimPeriod);
  ~FreedMemoryTrimmer();
  FreedMemoryTrimmer(const FreedMemoryTrimmer&) = delete;
  FreedMemoryTrimmer& operator=(const FreedMemoryTrimmer&) = delete;

  // One pass now: true when some memory went back to the system.
  static bool TrimNow();
  // How many passes ran, and how many of them gave memory back.
  uint64_t passes() ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t released() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop(absl::Duration period) ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t passes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t released_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace flopscope::daemon
