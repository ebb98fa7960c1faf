#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/mutex.h"

namespace flopscope::injector {

// What the process is doing right now in training terms, for counted FLOPs (KernelFlops).
struct PhaseContext {
  uint64_t phase_path_id = 0;  // innermost open `flopscope`-domain range, any thread; 0: none
  int64_t step = -1;           // ordinal of the open step (0-based); -1: none open
};

// Told when a step begins and ends (the counter windows,
// injector/cupti/counter_windows/counter_collector.h).
class StepListener {
 public:
  virtual ~StepListener() = default;
  virtual void OnStepBegin(int64_t step) noexcept = 0;
  virtual void OnStepEnd(int64_t step) noexcept = 0;
};

// Steps and phases of the whole process (DESIGN: Time), from the ranges of the `flopscope` NVTX
// domain: RangeTracker reports every such range that opens or closes, push/pop and start/end
// alike.
//
// A step is the range `step` (what `flopscope run --torch` pushes). Steps are counted per
// process, not per thread: one begins when a `step` range opens while none is open anywhere,
// and ends when the last open one closes, so steps pushed on two threads at once count once.
// The phase is the innermost open flopscope range of the process, whichever thread opened it:
// autograd launches backward kernels from its own threads, inside the main thread's `backward`.
//
// Opened/Closed take one mutex (a few flopscope ranges per step, never on the module-range or
// launch paths); Current() and ranges_counted() are lock-free.
class StepTracker {
 public:
  // Set once, before any flopscope range is reported.
  void SetListener(StepListener* listener) { listener_ = listener; }

  void Opened(std::string_view name, uint64_t path_id, uint64_t instance_id) noexcept;
  void Closed(uint64_t instance_id) noexcept;

  // Lock-free (read at kernel launches inside counter windows). The two fields are read apart,
  // so across a step boundary they may straddle it; FLOPs are attributed per kernel and a
  // launch racing a step boundary belongs to either side.
  PhaseContext Current() const noexcept {
    return PhaseContext{phase_path_id_.load(std::memory_order_relaxed),
                        step_.load(std::memory_order_relaxed)};
  }
  // Steps begun so far in the process.
  int64_t steps_begun() const noexcept;

  // RangeEvent.counted for ranges that close now: a counter window is open and counting. One
  // relaxed load at every range close; the counter windows set it.
  bool ranges_counted() const noexcept { return ranges_counted_.load(std::memory_order_relaxed); }
  void SetRangesCounted(bool counted) noexcept {
    ranges_counted_.store(counted, std::memory_order_relaxed);
  }

 private:
  struct Open {
    uint64_t instance_id;
    uint64_t path_id;
    bool is_step;
  };

  void PublishPhaseLocked() FS_REQUIRES(mutex_);

  // Guards open_, open_steps_ and next_step_, and orders the listener's calls: it is held while
  // the listener runs, so a step's end is always delivered before the next step's begin. Lock
  // order: this mutex, then the listener's own (which never calls back in here).
  mutable Mutex mutex_;
  std::vector<Open> open_ FS_GUARDED_BY(mutex_);  // in opening order; the last is the innermost
  uint32_t open_steps_ FS_GUARDED_BY(mutex_) = 0;
  int64_t next_step_ FS_GUARDED_BY(mutex_) = 0;
  StepListener* listener_ = nullptr;

  std::atomic<uint64_t> phase_path_id_{0};
  std::atomic<int64_t> step_{-1};
  std::atomic<bool> ranges_counted_{false};
};

}  // namespace flopscope::injector
