#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "injector/transport/transport_abi.h"

namespace flopscope::injector {

// flopscope.v1.LossCause, by its ABI names (transport_abi.h; the core cannot include protobuf).
enum class LossCause : uint32_t {
  kBufferFull = FS_LOSS_BUFFER_FULL,
  kDaemonUnreachable = FS_LOSS_DAEMON_UNREACHABLE,
  kRejected = FS_LOSS_REJECTED,
  kUnmatchedPop = FS_LOSS_UNMATCHED_POP,
  kStackOverflow = FS_LOSS_STACK_OVERFLOW,
  kTooManyPaths = FS_LOSS_TOO_MANY_PATHS,
  kUnclosedRange = FS_LOSS_UNCLOSED_RANGE,
  kCuptiDropped = FS_LOSS_CUPTI_DROPPED,
  kExitUndelivered = FS_LOSS_EXIT_UNDELIVERED,
  kCounterUnmatched = FS_LOSS_COUNTER_UNMATCHED,
};

// Cumulative per-cause counts for the session. Any thread may add; the exporter snapshots.
class LossCounters {
 public:
  static constexpr uint32_t kMaxCause = FS_LOSS_CAUSE_MAX;

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
