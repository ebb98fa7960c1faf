#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "injector/kernel_api.h"
#include "injector/ranges/counter_windows.h"
#include "injector/records/identity.h"

namespace flopscope::injector {

// Where kernel tracing puts what it learns: the session in production (KernelApiSink), a
// recorder in tests. Every method is noexcept and callable from any thread.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  // The launching thread's innermost module range (the launch callback's hot path).
  virtual RangeContext CurrentContext() noexcept = 0;
  virtual uint32_t InternName(std::string_view mangled_name) noexcept = 0;
  // Returns how many of the records were buffered (the rest were dropped and counted).
  virtual size_t Enqueue(const KernelRecord* records, size_t count) noexcept = 0;
  virtual void Metadata(std::string_view key, std::string_view value) noexcept = 0;
  // CUPTI's own dropped records, and activities it delivered without timestamps.
  virtual void CountDropped(uint64_t records) noexcept = 0;
  // Attributed records the tracer had no room for (LOSS_CAUSE_BUFFER_FULL).
  virtual void CountBufferFull(uint64_t records) noexcept = 0;
  // Asks for an early collection cycle (records are piling up).
  virtual void Wake() noexcept = 0;

  // ---- counter windows (injector/cupti/counter_windows/counter_collector.h) ----
  // The process's step and phase (read at launches inside a window).
  virtual PhaseContext CurrentPhase() noexcept = 0;
  // RangeEvent.counted for ranges closing from now on.
  virtual void SetRangesCounted(bool counted) noexcept = 0;
  // Counted FLOPs of decoded launches (consumed); returns how many were buffered.
  virtual size_t EnqueueFlops(std::vector<KernelFlopsRecord>* records) noexcept = 0;
  // A window is over and all its data decoded.
  virtual void WindowClosed(CounterWindowRecord window) noexcept = 0;
  // Counter ranges or launches that could not be paired (LOSS_CAUSE_COUNTER_UNMATCHED).
  virtual void CountCounterUnmatched(uint64_t records) noexcept = 0;
  // A library the tracer uses registered its exit-time teardown after the tracer's exit handler
  // (libnvperf_host, at each use of the Profiler Host API): register the handler again, so that
  // it runs first and finds the library whole.
  virtual void RearmExitHandler() noexcept = 0;
};

struct TracingOutcome {
  bool tracing = false;
  // For the session hello and `flopscope report`: why there are no kernels, or what traces them.
  std::string status;
};

// GPU activity tracing (CUPTI in this build; see injector/cupti/kernel_tracer.h).
class KernelTracing {
 public:
  virtual ~KernelTracing() = default;
  // Subscribes and enables tracing once; later calls return the first outcome. Call when CUDA
  // initialises (InitializeInjection) or, failing that, before the job creates a context.
  virtual TracingOutcome Attach() noexcept = 0;
  // Whether Attach ran already (whatever its outcome).
  virtual bool attempted() const noexcept = 0;
  // The exporter thread, at the start of every cycle: flush what CUPTI holds and hand the
  // attributed records and metadata to the sink. `final` at exit: every waiting record released
  // (FinishAtExit did the CUPTI half; when it could not run, this does it).
  virtual void Collect(bool final) noexcept = 0;
  // At exit, on the exiting thread, before the exporter's final cycle (an atexit handler
  // registered right after a successful Attach, so it runs before CUDA's own teardown): the
  // CUPTI half of the final collection (unsubscribe, forced flush, counter windows finished).
  // Afterwards Collect makes no CUPTI call. Idempotent.
  virtual void FinishAtExit() noexcept {}
  // The exporter did not stop in time at exit: no CUPTI call from now on, from any thread.
  virtual void Abandon() noexcept {}
  // Counter windows on this tracing's CUPTI subscription; null when it has none.
  virtual CounterWindows* counter_windows() noexcept { return nullptr; }
};

// Null when this build has no CUPTI or FLOPSCOPE_KERNELS=0; `unavailable` then says which.
// `warnings` gets malformed settings.
std::unique_ptr<KernelTracing> MakeKernelTracing(TraceSink* sink, const EnvLookup& env,
                                                 std::vector<std::string>* warnings,
                                                 std::string* unavailable);

}  // namespace flopscope::injector
