#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "injector/ranges/domain_registry.h"
#include "injector/ranges/open_stacks.h"
#include "injector/ranges/path_cache.h"
#include "injector/ranges/path_table.h"
#include "injector/ranges/range_clock.h"
#include "injector/ranges/step_tracker.h"
#include "injector/records/loss_counters.h"
#include "injector/records/thread_buffer.h"

namespace flopscope::injector {

struct ThreadExitGuard;

// What was open on a thread at a given moment: the innermost module range (kernel attribution at
// launch, injector/cupti). Zeros when none is open.
struct RangeContext {
  uint64_t path_id = 0;
  uint64_t instance_id = 0;
};

// Follows NVTX ranges per thread and turns each closed one into a RangeEvent.
//
// Module ranges (every domain but `flopscope`) nest on one per-thread stack, and their paths
// form the module tree (`Model/layer.0/attn`). Ranges of the `flopscope` domain (steps, phases)
// live on a second per-thread stack, so they never become parents of module paths; their paths
// hang off the enclosing flopscope range instead. Start/End ranges are process-wide (they may end
// on another thread) and take the starting thread's innermost range as parent.
//
// Timestamps in the records are raw readings of `clock` (see RangeClock); the exporter converts
// them. All methods are safe to call from any thread at any time. A RangeTracker must outlive
// every thread that used it (the injector's is never destroyed).
class RangeTracker {
 public:
  static constexpr uint32_t kMaxDepth = 256;
  // Open start/end ranges allowed at once; more are counted as STACK_OVERFLOW and not tracked.
  static constexpr size_t kMaxOpenStartEnd = 1000000;

  RangeTracker(const RangeClock* clock, PathTable* paths, BufferRegistry* buffers,
               LossCounters* losses);
  RangeTracker(const RangeTracker&) = delete;
  RangeTracker& operator=(const RangeTracker&) = delete;

  // Steps and phases: told of every `flopscope`-domain range that opens or closes, and asked at
  // every range close whether a counter window counts it (RangeEvent.counted). Set once, before
  // any range is tracked; may stay null.
  void SetStepTracker(StepTracker* steps) { steps_ = steps; }

  // Returns the 0-based nesting level of the new range on its stack, or -1 when not tracked.
  int Push(const Domain* domain, std::string_view name);
  // Closes the innermost open range of `domain` on this thread; returns its level, or -1 when
  // none is open (counted as UNMATCHED_POP).
  int Pop(const Domain* domain);

  // Returns the range id for End (never 0 for a tracked range).
  uint64_t Start(const Domain* domain, std::string_view name);
  void End(uint64_t range_id);

  // Records a metadata mark when `domain` is the flopscope domain; ignores other marks.
  void Mark(const Domain* domain, std::string_view text);

  RangeContext CurrentContext();
  // Kernel records (injector/cupti): appended to the calling thread's buffer.
  bool AppendKernel(const fs_kernel& kernel);
  size_t AppendKernels(const fs_kernel* kernels, size_t count);
  // Metadata the injector learns itself (device facts, kernel tracing status), timestamped now.
  bool AppendMetadata(std::string key, std::string value);
  // Counter windows' records (injector/cupti), appended to the calling thread's buffer.
  size_t AppendKernelFlops(std::vector<KernelFlopsRecord>* records);
  bool AppendWindow(CounterWindowRecord record);

  // Ranges open right now on live threads plus open start/end ranges (counted as UNCLOSED_RANGE
  // at exit; threads that already exited counted theirs when they did).
  uint64_t CountOpenRanges();
  // The push/pop ranges open right now on every live thread that has any (`flopscope where`),
  // read without stopping the threads (open_stacks.h). Start timestamps are raw clock readings.
  // A thread that changed its stacks under every try is left out: it is busy, not stuck.
  void ReadOpenStacks(std::vector<ThreadOpenStacks>* out);

  // The thread_local guard that tells the tracker a thread exited.
  struct ThreadState;
  friend struct ThreadExitGuard;

 private:
  struct OpenStartEnd {
    uint64_t path_id;
    uint64_t parent_instance_id;
    uint64_t thread_id;
    int64_t start_ns;
    bool flopscope;  // a step or phase (StepTracker follows it)
  };

  ThreadState* ThisThread();
  ThreadState* AttachThisThread();
  void Detach(ThreadState* state);
  uint64_t InternCached(ThreadState* state, uint64_t parent_id, const Domain* domain,
                        std::string_view name);
  uint64_t NextInstanceId(ThreadState* state);
  void Emit(ThreadState* state, const fs_range_event& event);
  int64_t Now() const;  // a raw clock reading
  uint8_t Counted() const { return steps_ != nullptr && steps_->ranges_counted() ? 1 : 0; }

  const uint64_t generation_;  // tells this tracker's thread states from another's
  const RangeClock* const clock_;
  PathTable* const paths_;
  BufferRegistry* const buffers_;
  LossCounters* const losses_;
  StepTracker* steps_ = nullptr;
  std::atomic<uint64_t> next_instance_block_{0};

  // Guards the live-thread list; taken when a thread attaches or exits and by CountOpenRanges.
  Mutex threads_mutex_;
  std::vector<ThreadState*> live_threads_ FS_GUARDED_BY(threads_mutex_);

  // A thread without a state of its own (its thread_local state is gone) appends here: exit()
  // runs the exiting thread's thread_local destructors before the exit handlers, and the
  // tracer's exit handler decodes the last counter passes on that thread (GPU acceptance, H200,
  // 2026-11-26: a window evaluated at exit lost its FLOPs and its record without a count).
  // One buffer, registered at first use, one producer at a time under the mutex.
  ThreadBuffer* OrphanBuffer() FS_REQUIRES(orphan_mutex_);
  template <typename Append>
  size_t AppendToSomeBuffer(size_t count, Append append) FS_EXCLUDES(orphan_mutex_);
  Mutex orphan_mutex_;
  ThreadBuffer* orphan_buffer_ FS_GUARDED_BY(orphan_mutex_) = nullptr;

  // Guards open start/end ranges; taken by nvtxRangeStart/End only (never by push/pop).
  Mutex start_end_mutex_;
  std::unordered_map<uint64_t, OpenStartEnd> open_start_end_ FS_GUARDED_BY(start_end_mutex_);
};

}  // namespace flopscope::injector
