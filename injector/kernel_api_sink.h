#pragma once

#include "injector/kernel_tracing.h"

namespace flopscope::injector {

// The production TraceSink: everything goes to the running session through kernel_api.h, so it
// does nothing in a process without a session (a forked child, for one).
class KernelApiSink final : public TraceSink {
 public:
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
  void RearmExitHandler() noexcept override;
};

}  // namespace flopscope::injector
