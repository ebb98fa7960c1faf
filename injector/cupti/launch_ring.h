#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "injector/ranges/range_tracker.h"

namespace flopscope::injector::cupti {

// correlation id -> the range open on the launching thread (and whether the launch was counted
// in a counter window), written at every launch callback and read when the GPU activity arrives.
//
// CUPTI hands out correlation ids from one process-wide increasing counter, so a ring indexed by
// `id mod slots` is a hash table that needs no hashing, no allocation and no lock: the launching
// thread (the hot path) does one compare-and-swap and three stores. A slot is overwritten when
// `slots` more launches happened before the activity of the old one was read; the reader sees a
// newer id and knows the attribution was lost. Slots are never cleared, so all the kernels of
// one graph launch (which share the launch's correlation id) find it.
//
// Each slot is a seqlock: the writer makes the sequence odd, writes, makes it even again; a
// reader retries when it saw an odd or changed sequence. Thread-safe for any number of writers
// and readers; two writers on one slot at once (ids `slots` apart, launched at the same instant)
// drop the second write.
class LaunchRing {
 public:
  static constexpr uint32_t kDefaultSlots = 1u << 18;  // 6 MiB, allocated when CUPTI attaches

  enum class Outcome {
    kFound,        // *context holds what was open at the launch
    kNotYet,       // no launch with this id was seen (yet)
    kOverwritten,  // seen, but the slot was reused since: the attribution is lost
  };

  // `slots` is rounded up to a power of two.
  explicit LaunchRing(uint32_t slots = kDefaultSlots);
  LaunchRing(const LaunchRing&) = delete;
  LaunchRing& operator=(const LaunchRing&) = delete;

  // `counted`: the launch ran inside a counter window (kernel replay serialised it).
  void Record(uint32_t correlation_id, RangeContext context, bool counted = false) noexcept;
  Outcome Find(uint32_t correlation_id, RangeContext* context,
               bool* counted = nullptr) const noexcept;

  uint32_t slots() const { return mask_ + 1; }
  // Writes dropped because another writer held the slot.
  uint64_t collisions() const { return collisions_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    std::atomic<uint32_t> sequence{0};
    std::atomic<uint32_t> correlation_id{0};
    std::atomic<uint64_t> path_id{0};
    // The range's instance id, with kCountedBit set for a counted launch: instance ids count up
    // from 1 and never reach 2^63, and the bit keeps the slot at 24 bytes.
    std::atomic<uint64_t> instance_id{0};
  };
  static constexpr uint64_t kCountedBit = uint64_t{1} << 63;

  uint32_t mask_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> collisions_{0};
};

}  // namespace flopscope::injector::cupti
