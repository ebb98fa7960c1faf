#include "injector/cupti/launch_ring.h"

namespace flopscope::injector::cupti {
namespace {

uint32_t RoundUpToPowerOfTwo(uint32_t n) {
  uint32_t power = 1;
  while (power < n && power < (1u << 31)) power <<= 1;
  return power;
}

// A reader gives up after this many torn reads in a row and treats the launch as not seen yet;
// the joiner asks again on its next pass.
constexpr int kReadAttempts = 8;

}  // namespace

LaunchRing::LaunchRing(uint32_t slots)
    : mask_(RoundUpToPowerOfTwo(slots) - 1), slots_(new Slot[mask_ + 1]) {}

void LaunchRing::Record(uint32_t correlation_id, RangeContext context, bool counted) noexcept {
  Slot& slot = slots_[correlation_id & mask_];
  uint32_t sequence = slot.sequence.load(std::memory_order_relaxed);
  // Odd: a writer is in the slot now. Taking the slot with a CAS keeps two writers from
  // interleaving their fields; the loser's launch simply stays unattributed.
  if ((sequence & 1u) != 0 ||
      !slot.sequence.compare_exchange_strong(sequence, sequence + 1, std::memory_order_acquire,
                                             std::memory_order_relaxed)) {
    collisions_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Orders the odd sequence before the field stores for readers on other cores.
  std::atomic_thread_fence(std::memory_order_release);
  slot.correlation_id.store(correlation_id, std::memory_order_relaxed);
  slot.path_id.store(context.path_id, std::memory_order_relaxed);
  slot.instance_id.store(context.instance_id | (counted ? kCountedBit : 0),
                         std::memory_order_relaxed);
  slot.sequence.store(sequence + 2, std::memory_order_release);
}

LaunchRing::Outcome LaunchRing::Find(uint32_t correlation_id, RangeContext* context,
                                     bool* counted) const noexcept {
  const Slot& slot = slots_[correlation_id & mask_];
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    const uint32_t before = slot.sequence.load(std::memory_order_acquire);
    if ((before & 1u) != 0) continue;
    const uint32_t stored_id = slot.correlation_id.load(std::memory_order_relaxed);
    const RangeContext stored{slot.path_id.load(std::memory_order_relaxed),
                              slot.instance_id.load(std::memory_order_relaxed)};
    // Orders the field loads before the second sequence load (the seqlock read side).
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.sequence.load(std::memory_order_relaxed) != before) continue;
    if (before == 0) return Outcome::kNotYet;  // never written
    // Ids wrap at 2^32: compare by signed distance.
    const int32_t distance = static_cast<int32_t>(stored_id - correlation_id);
    if (distance == 0) {
      *context = RangeContext{stored.path_id, stored.instance_id & ~kCountedBit};
      if (counted != nullptr) *counted = (stored.instance_id & kCountedBit) != 0;
      return Outcome::kFound;
    }
    return distance > 0 ? Outcome::kOverwritten : Outcome::kNotYet;
  }
  return Outcome::kNotYet;
}

}  // namespace flopscope::injector::cupti
