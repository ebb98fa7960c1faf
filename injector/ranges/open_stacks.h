#pragma once

// What other threads may read of a thread's range stacks, for `flopscope where` (issue 31): the
// path id and start of every open push/pop range, published by the owner thread as it pushes and
// pops, read by the exporter at most once a second (RangeTracker::ReadOpenStacks).
//
// Hazard: the stacks live on the application's hot path, and the reader is another thread. The
// owner takes no lock and loads nothing shared for this; it only stores, into fixed slots of
// relaxed atomics:
//   push: the new slot (tag 0 first; path, start and the tag of the slot below; then its tag, the
//         range's instance id, unique in the process), then the depth (release);
//   pop:  the depth (release); a range popped from under another domain's ranges (rare) rewrites
//         the slots above it, shifted down, the same way.
// The reader loads the depth (acquire) and validates each slot it copies like a sequence lock
// whose sequence is the slot's tag: the tag is read (acquire) before the fields and again after
// an acquire fence, and the copy is kept only when both reads agree and are not 0 (instance ids
// are never reused, so a rewritten slot always changes its tag). Consecutive slots must chain
// (each slot names the tag of the one below), and the depth must be the same after the copy,
// else the whole read is tried again (bounded: kReadTries) and a thread that changes its stacks
// under every try is left out of that snapshot: it is busy, not stuck. Every shared field is an
// atomic, so a torn copy is discarded, never undefined behaviour; nothing is allocated on the hot
// path, and the reader never follows a pointer the owner may free. The ThreadState owning these
// slots is freed only by Detach under the tracker's threads_mutex_, which the reader holds.
// bench/nvtx_overhead measures what this adds to a push+pop pair.

#include <atomic>
#include <cstdint>
#include <vector>

namespace flopscope::injector {

struct OpenRangeEntry {
  uint64_t path_id = 0;
  int64_t start_ns = 0;  // a raw RangeClock reading until the exporter converts it
  bool operator==(const OpenRangeEntry&) const = default;
};

// One thread's open ranges as read: outermost first, at most kReportedPerStack per stack (the
// outermost range and the innermost ones), the depths saying how many are open.
struct ThreadOpenStacks {
  uint64_t thread_id = 0;
  std::vector<OpenRangeEntry> modules;
  uint32_t module_depth = 0;
  std::vector<OpenRangeEntry> phases;
  uint32_t phase_depth = 0;
  bool operator==(const ThreadOpenStacks&) const = default;
};

class OpenStacks {
 public:
  static constexpr uint32_t kSlots = 256;  // RangeTracker::kMaxDepth
  static constexpr uint32_t kReportedPerStack = 16;
  static constexpr int kReadTries = 256;

  enum class Stack { kModules, kPhases };

  // Owner thread only. `tag`: the range's instance id (> 0, never reused); `below_tag`: the tag
  // of slot index - 1 (0 for slot 0). Then SetDepth.
  void Publish(Stack stack, uint32_t index, uint64_t tag, uint64_t below_tag, uint64_t path_id,
               int64_t start_ns) {
    Slot& slot = SideOf(stack).slots[index];
    slot.tag.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    slot.path_id.store(path_id, std::memory_order_relaxed);
    slot.start_ns.store(start_ns, std::memory_order_relaxed);
    slot.below_tag.store(below_tag, std::memory_order_relaxed);
    slot.tag.store(tag, std::memory_order_release);
  }
  void SetDepth(Stack stack, uint32_t depth) {
    SideOf(stack).depth.store(depth, std::memory_order_release);
  }

  // Any thread: a consistent copy into *out (thread_id untouched); false when the owner changed
  // the stacks under every try.
  bool Read(ThreadOpenStacks* out) const;

 private:
  struct Slot {
    std::atomic<uint64_t> tag{0};
    std::atomic<uint64_t> below_tag{0};
    std::atomic<uint64_t> path_id{0};
    std::atomic<int64_t> start_ns{0};
  };
  // The depth first: a push at the bottom of the stack (the common loop) stores into one cache
  // line.
  struct Side {
    std::atomic<uint32_t> depth{0};
    Slot slots[kSlots];
  };
  Side& SideOf(Stack stack) { return stack == Stack::kModules ? modules_ : phases_; }
  // One try at a side: false when it changed under the copy.
  static bool ReadSide(const Side& side, std::vector<OpenRangeEntry>* out, uint32_t* depth);

  Side modules_;
  Side phases_;
};

}  // namespace flopscope::injector
