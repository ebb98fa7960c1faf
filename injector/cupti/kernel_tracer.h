#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/mutex.h"
#include "injector/cupti/activity_buffer_pool.h"
#include "injector/cupti/callback_roles.h"
#include "injector/cupti/counter_windows/counter_collector.h"
#include "injector/cupti/cupti_api.h"
#include "injector/cupti/device_catalog.h"
#include "injector/cupti/graph_node_table.h"
#include "injector/cupti/kernel_joiner.h"
#include "injector/cupti/kernel_name_cache.h"
#include "injector/cupti/launch_ring.h"
#include "injector/cupti/recorder.h"
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
//   exit (FinishAtExit, on the exiting thread, before CUDA's own exit handlers) -> unsubscribe,
//   forced flush, counter windows finished, our activity kinds disabled; afterwards no CUPTI
//   call is made from any thread, and the exporter's final cycle only moves the outbox
//
// Locks: attach_mutex_ (Attach only), collect_mutex_ (one collection at a time: the exporter's
// cycle or the exit's), join_mutex_ (joiner), the outbox's and the tables' own. No lock that a
// callback takes is ever held across a CUPTI call: CUPTI may call back into us from inside any
// of its functions (FlushAll delivers buffers synchronously), and a lock held there would
// deadlock or invert with CUPTI's internal ones. attach_mutex_ and collect_mutex_ are held
// across CUPTI calls on purpose: no callback takes them, they only serialise one caller's
// sequence (style.md 2.10's exception).
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

  TracingOutcome Attach() noexcept override FS_EXCLUDES(attach_mutex_, join_mutex_);
  bool attempted() const noexcept override FS_EXCLUDES(attach_mutex_);
  void Collect(bool final) noexcept override FS_EXCLUDES(collect_mutex_, join_mutex_);
  void FinishAtExit() noexcept override FS_EXCLUDES(collect_mutex_, join_mutex_);
  void Abandon() noexcept override;
  CounterWindows* counter_windows() noexcept override { return counters_.get(); }

  // CUPTI's entry points into the tracer; public so tests and bench/launch_overhead can drive
  // them with synthetic data exactly as CUPTI would.
  static void CUPTIAPI OnCallback(void* userdata, CUpti_CallbackDomain domain,
                                  CUpti_CallbackId cbid, const void* data);
  static void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI OnBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                         size_t size, size_t valid_size);
  static uint64_t CUPTIAPI RealtimeTimestamp();

  const KernelJoiner::Counters JoinCounters() FS_EXCLUDES(join_mutex_);
  uint64_t enabled_api_callbacks() const { return enabled_api_callbacks_; }
  // Counted kernels CUPTI delivered without timestamps (kernel replay), not counted as lost.
  uint64_t replayed_untimed() const { return replayed_untimed_.load(std::memory_order_relaxed); }
  // "kernel tracing lost N GPU activities (CUPTI_DROPPED): ..." by cause, and the counted kernels
  // without timestamps; "" when there is neither. Detach writes it to stderr once.
  std::string DescribeDrops() const;
  // The activity kinds this tracer enabled (and so may disable), in the order it enabled them.
  const std::vector<CUpti_ActivityKind>& enabled_kinds() const { return enabled_kinds_; }

  // How many launches past the last delivered record the tracer must find in the ring, after
  // buffers stayed away for a whole stall period, to conclude that another CUPTI client in the
  // process took the activity buffer callbacks (D9).
  // (TracerOptions::takeover_stall_ms is the period.)
  static constexpr uint32_t kTakeoverLaunches = 256;
  // The gpu.status a takeover leaves.
  static constexpr const char* kTakeoverStatus =
      "CUPTI's activity buffers were taken by another CUPTI client in this process "
      "(torch.profiler/Kineto?): kernel tracing stopped; NVTX ranges only";

 private:
  // The attach, one step per function; each returns the step that failed (or nullopt), with
  // `result` and `holder` saying why.
  struct AttachFailure {
    AttachStep step = AttachStep::kSubscribe;
    CUptiResult result = CUPTI_SUCCESS;
    std::string holder;
  };
  TracingOutcome AttachLocked() FS_REQUIRES(attach_mutex_) FS_EXCLUDES(join_mutex_);
  // Loads libcupti (or takes the injected table); false with `status` when there is none.
  bool LoadApi(std::string* status, std::string* path, uint32_t* version, void** handle)
      FS_REQUIRES(attach_mutex_);
  std::optional<AttachFailure> Subscribe() FS_REQUIRES(attach_mutex_);
  std::optional<AttachFailure> EnableCallbacks() FS_REQUIRES(attach_mutex_);
  bool EnableApiCallbacks(CUpti_CallbackDomain domain, uint32_t end_cbid)
      FS_REQUIRES(attach_mutex_);
  bool EnableResourceCallbacks() FS_REQUIRES(attach_mutex_);
  // Enables `kind` and remembers it when CUPTI accepted it.
  CUptiResult EnableKind(CUpti_ActivityKind kind) FS_REQUIRES(attach_mutex_);
  // Unsubscribes (when subscribed) and disables the kinds this tracer enabled, nothing else.
  void Detach() FS_EXCLUDES(join_mutex_);
  void CollectLocked(bool final) FS_REQUIRES(collect_mutex_) FS_EXCLUDES(join_mutex_);
  // D9: buffers stopped coming while launches go on; true when the tracer stopped because of it.
  bool CheckTakeover() FS_REQUIRES(collect_mutex_);
  void OnResource(CUpti_CallbackId cbid, const void* data) FS_EXCLUDES(join_mutex_);
  void OnGraphInstantiate(const CUpti_CallbackData& call);
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
  void ProcessBuffer(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t valid_size)
      FS_EXCLUDES(join_mutex_);
  void Deliver(bool final) FS_REQUIRES(collect_mutex_) FS_EXCLUDES(join_mutex_);
  // The role an API callback was enabled for (kIgnore when it was not).
  CallbackRole RoleOf(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) const {
    const std::vector<CallbackRole>& roles =
        domain == CUPTI_CB_DOMAIN_DRIVER_API ? driver_roles_ : runtime_roles_;
    return cbid < roles.size() ? roles[cbid] : CallbackRole::kIgnore;
  }
  static void OnForkChild();

  static inline std::atomic<KernelTracer*> active_{nullptr};

  TraceSink* const sink_;
  const TracerOptions options_;
  const uint32_t ring_slots_;
  std::optional<CuptiApi> injected_api_;

  // Guards the attach state below; callbacks never take it.
  mutable Mutex attach_mutex_;
  bool attempted_ FS_GUARDED_BY(attach_mutex_) = false;
  TracingOutcome outcome_ FS_GUARDED_BY(attach_mutex_);
  // The attach's results. Written by the attach before any callback can fire and before the
  // exporter's first cycle; read-only afterwards except by Detach (one caller, collect_mutex_
  // or the attach itself).
  CuptiApi api_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  uint64_t enabled_api_callbacks_ = 0;
  std::vector<CUpti_ActivityKind> enabled_kinds_;  // D8: only these are ever disabled
  // CallbackRole of each driver- and runtime-API callback id (filled while enabling, before
  // any callback).
  std::vector<CallbackRole> driver_roles_;
  std::vector<CallbackRole> runtime_roles_;
  // FLOPSCOPE_RECORD_DIR: raw buffers as CUPTI handed them, for replay (null when not set).
  std::unique_ptr<Recorder> recorder_;

  // One collection at a time: the exporter's periodic cycle or the exit's (see the class
  // comment for why it may be held across CUPTI calls).
  Mutex collect_mutex_;
  // D9 takeover watch (collect_mutex_): when buffers were last seen, and how many by then.
  uint64_t buffers_seen_at_check_ FS_GUARDED_BY(collect_mutex_) = 0;
  uint64_t stall_since_ns_ FS_GUARDED_BY(collect_mutex_) = 0;
  std::atomic<uint64_t> buffers_completed_{0};
  std::atomic<uint32_t> last_delivered_correlation_{0};
  // Set once no CUPTI call may be made any more (exit flushed, stop timed out, takeover).
  std::atomic<bool> cupti_done_{false};
  std::atomic<bool> exit_finished_{false};

  // The counter windows, and the flag the launch path loads: nonzero while a window is open or
  // a profiler still runs (the collector keeps it here; always zero without counter windows).
  std::unique_ptr<CounterCollector> counters_;
  std::atomic<uint32_t> counter_attention_{0};

  std::unique_ptr<LaunchRing> ring_;  // set before callbacks are enabled
  // Counted kernels whose activity record came without timestamps (kernel replay): not lost.
  std::atomic<uint64_t> replayed_untimed_{0};
  // What CUPTI_DROPPED is made of, for the one line Detach writes (DescribeDrops).
  struct DropCounts {
    std::atomic<uint64_t> cupti_own{0};        // cuptiActivityGetNumDroppedRecords
    std::atomic<uint64_t> untimed_copies{0};   // memcpy/memset records without timestamps
    std::atomic<uint64_t> untimed_kernels{0};  // uncounted kernels without timestamps
    std::atomic<uint64_t> truncated{0};        // buffers with bytes after their last record
  };
  DropCounts drops_;
  // A counter window was seen (counting or finished): every flush from then on is forced.
  bool window_seen_ FS_GUARDED_BY(collect_mutex_) = false;
  std::atomic<bool> drops_described_{false};
  std::unique_ptr<ActivityBufferPool> pool_;  // set before buffer callbacks are registered
  GraphNodeTable nodes_;
  DeviceCatalog devices_;
  KernelNameCache names_;
  TraceOutbox outbox_;
  Mutex join_mutex_;  // guards *joiner_ (buffer threads and the exporter's aging pass)
  std::unique_ptr<KernelJoiner> joiner_ FS_PT_GUARDED_BY(join_mutex_);

  // Cleared in a forked child (no CUPTI threads there, and flushing would duplicate the
  // parent's records) and after detaching; callbacks check it first.
  std::atomic<bool> live_{false};
  uint64_t reported_not_seen_ FS_GUARDED_BY(collect_mutex_) = 0;
};

}  // namespace flopscope::injector::cupti
