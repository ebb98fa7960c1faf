// Reading another thread's published range stacks (open_stacks.h: the protocol and its hazard).
#include "injector/ranges/open_stacks.h"

#include <algorithm>

namespace flopscope::injector {

bool OpenStacks::ReadSide(const Side& side, std::vector<OpenRangeEntry>* out, uint32_t* depth) {
  out->clear();
  const uint32_t open = std::min(side.depth.load(std::memory_order_acquire), kSlots);
  *depth = open;
  // The outermost range (the oldest: what has been open longest) and the innermost ones (where
  // the thread is now); the middle of a deep stack is left out.
  const uint32_t inner_from = open <= kReportedPerStack ? 0 : open - (kReportedPerStack - 1);
  uint64_t previous_tag = 0;
  auto take = [&](uint32_t index, bool chained) {
    const Slot& slot = side.slots[index];
    const uint64_t tag = slot.tag.load(std::memory_order_acquire);
    const uint64_t below = slot.below_tag.load(std::memory_order_relaxed);
    const uint64_t path_id = slot.path_id.load(std::memory_order_relaxed);
    const int64_t start_ns = slot.start_ns.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (tag == 0 || slot.tag.load(std::memory_order_relaxed) != tag) return false;
    if (chained && below != previous_tag) return false;
    previous_tag = tag;
    // 0: a range the tracker could not intern (path table full): nothing to name it by.
    if (path_id != 0) out->push_back(OpenRangeEntry{path_id, start_ns});
    return true;
  };
  if (inner_from > 0 && !take(0, /*chained=*/false)) return false;
  for (uint32_t i = inner_from; i < open; ++i) {
    if (!take(i, /*chained=*/i > inner_from || inner_from == 0)) return false;
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return side.depth.load(std::memory_order_relaxed) == open;
}

bool OpenStacks::Read(ThreadOpenStacks* out) const {
  out->modules.reserve(kReportedPerStack);
  out->phases.reserve(kReportedPerStack);
  for (int attempt = 0; attempt < kReadTries; ++attempt) {
    if (ReadSide(modules_, &out->modules, &out->module_depth) &&
        ReadSide(phases_, &out->phases, &out->phase_depth)) {
      return true;
    }
  }
  return false;
}

}  // namespace flopscope::injector
