#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "injector/transport/transport_abi.h"

namespace flopscope::injector {

// Mirrors flopscope.v1.LossCause (the core cannot include protobuf headers).
enum class LossCause : uint32_t {
  kBufferFull = 1,
  kDaemonUnreachable = 2,
  kRejected = 3,
  kUnmatchedPop = 4,
  kStackOverflow = 5,
  kTooManyPaths = 6,
  kUnclosedRange = 7,
  kCuptiDropped = 8,
  kExitUndelivered = 9,
  kCounterUnmatched = 10,
};

// Cumulative per-cause counts for the session. Any thread may add; the exporter snapshots.
class LossCounters {
 public:
  static constexpr uint32_t kMaxCause = 10;

  // Relaxed: each counter is independent and only ever grows; the snapshot needs no ordering
  // with other memory.
  void Add(LossCause cause, uint64_t records) {
    counts_[static_cast<uint32_t>(cause)].fetch_add(records, std::memory_order_relaxed);
  }
  uint64_t Get(LossCause cause) const {
    return counts_[static_cast<uint32_t>(cause)].load(std::memory_order_relaxed);
  }
  // The non-zero counters, in cause order.
  std::vector<fs_loss> Snapshot() const {
    std::vector<fs_loss> out;
    for (uint32_t cause = 1; cause <= kMaxCause; ++cause) {
      const uint64_t n = counts_[cause].load(std::memory_order_relaxed);
      if (n > 0) out.push_back(fs_loss{cause, n});
    }
    return out;
  }

 private:
  std::atomic<uint64_t> counts_[kMaxCause + 1] = {};
};

}  // namespace flopscope::injector
