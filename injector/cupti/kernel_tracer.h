#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "injector/cupti/activity_buffer_pool.h"
#include "injector/cupti/callback_roles.h"
#include "injector/cupti/counter_windows/counter_collector.h"
#include "injector/cupti/cupti_api.h"
#include "injector/cupti/device_catalog.h"
#include "injector/cupti/graph_node_table.h"
#include "injector/cupti/kernel_joiner.h"
#include "injector/cupti/kernel_name_cache.h"
#include "injector/cupti/launch_ring.h"
#include "injector/cupti/trace_outbox.h"
#include "injector/cupti/tracer_options.h"
#include "injector/kernel_tracing.h"

namespace flopscope::injector::cupti {

// Kernel, memcpy and memset tracing with CUPTI, attributed to NVTX module ranges.
//
//   launch callback (application thread, CUPTI_API_ENTER of every launch / memcpy / memset API
//   of the driver and runtime domains) -> LaunchRing[correlation id] = current range (+ the
//   counter windows, when one is open or finishing: CounterCollector)
//   resource callbacks -> graph node ranges (GraphNodeTable), device chips (DeviceCatalog)
//   buffer completed (any thread) -> parse -> intern names -> join -> TraceOutbox
//   exporter cycle (Collect) -> cuptiActivityFlushAll -> outbox into the session
//
// Locks: attach_mutex_ (Attach only), join_mutex_ (joiner), the outbox's and the tables' own.
// No lock of ours is ever held across a CUPTI call: CUPTI may call back into us from inside any
// of its functions (FlushAll delivers buffers synchronously), and a lock held there would
// deadlock or invert with CUPTI's internal ones.
//
// One tracer per process can be active (CUPTI's buffer callbacks carry no user data, so they
// reach the tracer through a static). It is never destroyed while active: CUPTI threads may
// call in until the process ends.
class KernelTracer : public KernelTracing {
 public:
  // `api`: use this table instead of loading libcupti (tests, bench). `ring_slots`: LaunchRing
  // size. `counters`: the counter windows riding on this tracer's subscription (none: no
  // windows).
  KernelTracer(TraceSink* sink, TracerOptions options, std::optional<CuptiApi> api = std::nullopt,
               uint32_t ring_slots = LaunchRing::kDefaultSlots,
               std::unique_ptr<CounterCollector> counters = nullptr);
  KernelTracer(const KernelTracer&) = delete;
  KernelTracer& operator=(const KernelTracer&) = delete;
  ~KernelTracer() override;

  TracingOutcome Attach() noexcept override;
  bool attempted() const noexcept override;
  void Collect(bool final) noexcept override;
  CounterWindows* counter_windows() noexcept override { return counters_.get(); }

  // CUPTI's entry points into the tracer; public so tests and bench/launch_overhead can drive
  // them with synthetic data exactly as CUPTI would.
  static void CUPTIAPI OnCallback(void* userdata, CUpti_CallbackDomain domain,
                                  CUpti_CallbackId cbid, const void* data);
  static void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI OnBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                         size_t size, size_t valid_size);
  static uint64_t CUPTIAPI RealtimeTimestamp();

  const KernelJoiner::Counters JoinCounters();
  uint64_t enabled_api_callbacks() const { return enabled_api_callbacks_; }

 private:
  TracingOutcome AttachLocked();
  bool EnableApiCallbacks(CUpti_CallbackDomain domain, uint32_t end_cbid);
  bool EnableResourceCallbacks();
  void EnableActivityKinds();
  void Detach(bool finalize);
  void OnResource(CUpti_CallbackId cbid, const void* data);
  // A driver or runtime API callback while counter windows want launches: the launch path's
  // whole work then (ring record included). Out of line and cold: inlined, its live values
  // made every launch's callback save five registers first, ~2 ns per launch outside windows.
  [[gnu::noinline, gnu::cold]] void OnApiCallbackCounting(CUpti_CallbackDomain domain,
                                                          CUpti_CallbackId cbid,
                                                          const CUpti_CallbackData& call);
  bool CountedEnter(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                    const CUpti_CallbackData& call, RangeContext range);
  void CountedExit(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                   const CUpti_CallbackData& call);
  void ProcessBuffer(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t valid_size);
  void Deliver(bool final);
  static void OnForkChild();

  static inline std::atomic<KernelTracer*> active_{nullptr};

  TraceSink* const sink_;
  const TracerOptions options_;
  const uint32_t ring_slots_;
  std::optional<CuptiApi> injected_api_;

  // Guards the attach state below; callbacks never take it.
  mutable std::mutex attach_mutex_;
  bool attempted_ = false;
  TracingOutcome outcome_;
  CuptiApi api_;  // written before active_ is published, read-only afterwards
  CUpti_SubscriberHandle subscriber_ = nullptr;
  uint64_t enabled_api_callbacks_ = 0;
  // CallbackRole of each driver-API callback id (filled while enabling, before any callback).
  std::vector<CallbackRole> driver_roles_;

  // The counter windows, and the flag the launch path loads: nonzero while a window is open or
  // a profiler still runs (the collector keeps it here; always zero without counter windows).
  std::unique_ptr<CounterCollector> counters_;
  std::atomic<uint32_t> counter_attention_{0};

  std::unique_ptr<LaunchRing> ring_;          // set before callbacks are enabled
  std::unique_ptr<ActivityBufferPool> pool_;  // set before buffer callbacks are registered
  GraphNodeTable nodes_;
  DeviceCatalog devices_;
  KernelNameCache names_;
  TraceOutbox outbox_;
  std::mutex join_mutex_;  // guards joiner_ (buffer threads and the exporter's aging pass)
  std::unique_ptr<KernelJoiner> joiner_;

  // Cleared in a forked child (no CUPTI threads there, and flushing would duplicate the
  // parent's records) and after detaching; callbacks check it first.
  std::atomic<bool> live_{false};
  uint64_t reported_not_seen_ = 0;  // exporter thread only
};

}  // namespace flopscope::injector::cupti
