#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "injector/kernel_tracing.h"

namespace flopscope::injector::cupti::testing {

// A TraceSink that keeps everything it is given. The range "open" on a thread is whatever that
// thread last passed to SetThreadContext; the process's phase is whatever SetPhase said last.
// Thread-safe.
class RecordingSink : public TraceSink {
 public:
  static void SetThreadContext(RangeContext context);
  void SetPhase(PhaseContext phase);

  RangeContext CurrentContext() noexcept override;
  uint32_t InternName(std::string_view mangled_name) noexcept override;
  size_t Enqueue(const KernelRecord* records, size_t count) noexcept override;
  void Metadata(std::string_view key, std::string_view value) noexcept override;
  void CountDropped(uint64_t records) noexcept override;
  void CountBufferFull(uint64_t records) noexcept override;
  void Wake() noexcept override;
  PhaseContext CurrentPhase() noexcept override;
  void SetRangesCounted(bool counted) noexcept override;
  size_t EnqueueFlops(std::vector<KernelFlopsRecord>* records) noexcept override;
  void WindowClosed(CounterWindowRecord window) noexcept override;
  void CountCounterUnmatched(uint64_t records) noexcept override;
  void RearmExitHandler() noexcept override {
    MutexLock lock(&mutex_);
    ++rearms_;
  }
  uint64_t rearms() {
    MutexLock lock(&mutex_);
    return rearms_;
  }

  std::vector<KernelRecord> records();
  std::vector<std::pair<std::string, std::string>> metadata();
  std::string NameOf(uint32_t id);
  uint64_t dropped();
  uint64_t buffer_full();
  uint64_t wakes();
  std::vector<KernelFlopsRecord> flops();
  std::vector<CounterWindowRecord> windows();
  uint64_t unmatched();
  bool ranges_counted();

 private:
  Mutex mutex_;  // guards everything below
  std::map<std::string, uint32_t> names_ FS_GUARDED_BY(mutex_);
  std::vector<KernelRecord> records_ FS_GUARDED_BY(mutex_);
  std::vector<std::pair<std::string, std::string>> metadata_ FS_GUARDED_BY(mutex_);
  uint64_t dropped_ FS_GUARDED_BY(mutex_) = 0;
  uint64_t buffer_full_ FS_GUARDED_BY(mutex_) = 0;
  uint64_t wakes_ FS_GUARDED_BY(mutex_) = 0;
  PhaseContext phase_ FS_GUARDED_BY(mutex_);
  bool ranges_counted_ FS_GUARDED_BY(mutex_) = false;
  std::vector<KernelFlopsRecord> flops_ FS_GUARDED_BY(mutex_);
  std::vector<CounterWindowRecord> windows_ FS_GUARDED_BY(mutex_);
  uint64_t unmatched_ FS_GUARDED_BY(mutex_) = 0;
  uint64_t rearms_ FS_GUARDED_BY(mutex_) = 0;
};

}  // namespace flopscope::injector::cupti::testing
