#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "injector/ranges/counter_windows.h"
#include "injector/cupti/counter_windows/counter_backend.h"
#include "injector/cupti/counter_windows/counter_settings.h"
#include "injector/cupti/cupti_api.h"
#include "injector/cupti/counter_windows/launch_ordinals.h"
#include "injector/cupti/counter_windows/pass_evaluator.h"
#include "injector/cupti/counter_windows/range_profiler_api.h"
#include "injector/cupti/counter_windows/window_ledger.h"
#include "injector/cupti/counter_windows/window_scheduler.h"
#include "injector/kernel_tracing.h"

namespace flopscope::injector::cupti {

// Counter windows (DESIGN: FLOPs): the CUPTI range profiler in auto-range, kernel-replay mode,
// switched on for the steps of a window and off again, and every counted launch's counters
// turned into a KernelFlops record.
//
//   step begin / end (StepTracker, under its mutex) -> WindowScheduler -> window open / closed
//   launch enter (application thread, the tracer's callback) -> the context's profiler is
//     started, its pass ended and restarted (image full, graph launch, window over, context
//     switch), and the launch gets the next ordinal of its context's pass
//   exporter cycle (Collect) -> each ended pass evaluated (PassEvaluator) -> KernelFlops,
//     unmatched losses, and the CounterWindowRecord of each finished window
//
// Hazards, each handled where it arises:
//  - No lock of ours is held across a CUPTI call: CUPTI may call back into the tracer from
//    inside any of its functions. A context's profiler is driven by one thread at a time (its
//    `transitioning` flag, set and cleared under mutex_, the CUPTI calls in between unlocked).
//    A launch that comes meanwhile is not counted and taints the passes around the switch.
//  - Profiler calls happen on a launching thread of the same context (its context is current
//    there), at context destruction, when another context takes the profiler (on that one's
//    launching thread, as NVIDIA's injection sample does) and, at exit, on the exporter thread.
//    GPU-TODO: whether Stop/Decode may run where the context is not current; the last two
//    cases assume they may. So a closed window's profiler stops at its context's next launch
//    (before that kernel runs): an idle process's last window is decoded at exit.
//  - One context's profiler runs at a time, as NVIDIA's injection sample does. GPU-TODO: try
//    several at once (multi-GPU processes now stop one to start the other).
//  - Outside windows the launch path pays one relaxed load (wants_launches()).
//  - fork: only the tracer's callbacks reach here, and the tracer goes quiet in a child.
class CounterCollector final : public CounterWindows {
 public:
  // `profiler_api` and `backend` replace what Bind would resolve from libcupti (tests).
  CounterCollector(TraceSink* sink, CounterSettings settings,
                   std::optional<RangeProfilerApi> profiler_api = std::nullopt,
                   std::unique_ptr<CounterBackend> backend = nullptr);
  CounterCollector(const CounterCollector&) = delete;
  CounterCollector& operator=(const CounterCollector&) = delete;
  ~CounterCollector() override;

  // The tracer attached: resolve the range profiler and the Host API from `cupti_handle` (the
  // libcupti it opened; may be null when both were given to the constructor).
  void Bind(const CuptiApi& cupti, void* cupti_handle) noexcept;
  // The tracer could not attach: every request is refused with `reason`.
  void Unavailable(const std::string& reason) noexcept;

  // The launch path's only cost outside windows: one relaxed load.
  bool wants_launches() const noexcept { return attention_->load(std::memory_order_relaxed) != 0; }
  // Keeps the flag in `flag` instead (the tracer's, beside the fields its launch path reads
  // anyway, so the load costs no extra cache line or pointer). Call before Bind.
  void UseAttentionFlag(std::atomic<uint32_t>* flag) { attention_ = flag; }
  // A window is open and counting (for activities other than driver launches).
  bool counting_now() const noexcept { return counting_.load(std::memory_order_relaxed); }

  // A driver-API kernel or graph launch enters the driver (CUPTI_API_ENTER) on `call.context`;
  // `range` is the launching thread's module range. True when the launch was counted.
  bool OnLaunchEnter(const CUpti_CallbackData& call, bool graph, RangeContext range) noexcept;
  void OnLaunchExit(const CUpti_CallbackData& call) noexcept;
  void OnContextCreated(CUcontext context, uint32_t device, const std::string& chip) noexcept;
  void OnContextDestroying(CUcontext context) noexcept;
  // Exporter thread, every cycle: evaluate ended passes, emit records. `final`: end everything.
  void Collect(bool final) noexcept;

  // CounterWindows
  void OnStepBegin(int64_t step) noexcept override;
  void OnStepEnd(int64_t step) noexcept override;
  ControlAnswer RequestWindow(uint32_t steps, std::string_view metric_set,
                              uint64_t control_id) noexcept override;

 private:
  struct ContextState;
  struct Transition;
  enum class ProfilerInit { kNotYet, kRunning, kReady, kFailed };

  ContextState& StateFor(CUcontext context);
  // Under mutex_: what this launch's context needs before the launch can be counted.
  bool Decide(ContextState& state, bool graph, Transition* transition);
  void TakeRunningPass(ContextState& state, Transition* transition);
  // Without mutex_: the CUPTI calls.
  void Execute(Transition& transition) noexcept;
  void BeginProfiler(Transition& transition) noexcept;
  // Under mutex_ again: the results recorded, the context released.
  void Commit(Transition& transition);
  void CommitBegin(Transition& transition);
  bool RecordLaunch(ContextState& state, const CUpti_CallbackData& call, bool graph,
                    RangeContext range);
  void FinishAll();
  void ReportOnce(const std::string& status);
  void UpdateAttention();
  // Exporter thread: the passes a window on `chip` would take (cached).
  bool PassesFor(const std::string& chip, counters::MetricSetKind set, uint32_t* passes,
                 std::string* error);

  TraceSink* const sink_;
  const CounterSettings settings_;
  std::optional<RangeProfilerApi> injected_api_;
  RangeProfilerApi api_;                      // written by Bind before bound_ is set
  std::unique_ptr<CounterBackend> backend_;   // idem
  std::unique_ptr<PassEvaluator> evaluator_;  // exporter thread only
  std::map<std::pair<std::string, counters::MetricSetKind>, uint32_t> passes_;  // exporter only

  // Guards everything below. Taken on launches only inside windows (wants_launches()), at step
  // begins and ends, context events and exporter cycles; never held across a CUPTI call. Lock
  // order: StepTracker's mutex, then this one, then the sink's (string table, buffers).
  std::mutex mutex_;
  bool bound_ = false;
  CuptiApi cupti_;
  std::string unavailable_ = "CUDA has not initialised in this process yet";
  ProfilerInit profiler_init_ = ProfilerInit::kNotYet;
  std::string profiler_init_failure_;
  WindowScheduler scheduler_;
  WindowLedger ledger_;
  uint64_t open_window_ = 0;  // ledger id of the open window; 0: none
  counters::MetricSetKind open_set_ = counters::MetricSetKind::kCheap;
  bool steps_seen_ = false;
  std::map<CUcontext, std::unique_ptr<ContextState>> contexts_;
  ContextState* active_ = nullptr;  // the context whose profiler is enabled
  std::vector<FlushedPass> flushed_;
  std::set<std::string> reported_;  // statuses already printed to stderr

  // Read without mutex_ by every launch callback (relaxed: a launch that sees a stale zero just
  // as a window opens goes uncounted, and its range, if the profiler caught it, shows as a count
  // mismatch, never a shifted pair). Written under mutex_. It lives in the tracer when it says
  // so (UseAttentionFlag).
  std::atomic<uint32_t> own_attention_{0};
  std::atomic<uint32_t>* attention_ = &own_attention_;
  // A window is open and some context counts in it; read by launch callbacks of other kinds.
  std::atomic<bool> counting_{false};
};

}  // namespace flopscope::injector::cupti
