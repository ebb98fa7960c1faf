#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "injector/cupti/counter_windows/counter_backend.h"
#include "injector/cupti/counter_windows/counter_settings.h"
#include "injector/cupti/counter_windows/launch_ordinals.h"
#include "injector/cupti/counter_windows/pass_evaluator.h"
#include "injector/cupti/counter_windows/range_profiler_api.h"
#include "injector/cupti/counter_windows/window_ledger.h"
#include "injector/cupti/counter_windows/window_scheduler.h"
#include "injector/cupti/cupti_api.h"
#include "injector/kernel_tracing.h"
#include "injector/ranges/counter_windows.h"

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
// Communication kernels (NCCL and the like: comm_kernels.h) are never profiled: kernel replay
// would re-run a kernel whose peers wait for it, and hang the job (gpu-review D1). Before such a
// launch the context's pass ends (Stop, Decode; the profiler stays enabled), the launch takes no
// ordinal and is counted in the window record, and the next launch after its API exit starts a
// new pass (Resume). In a multi-rank job graph launches and launches without a kernel name are
// treated the same way (they may hold collectives: they are left out, as unmatched launches). A
// multi-rank job in which a communication kernel could not be kept out refuses further windows.
// A driver memcpy/memset ends the pass the same way (OnMemoryEnter): the driver may run it as a
// kernel of its own, which auto-range profiling numbers like a launch no callback announced.
//
// Hazards, each handled where it arises:
//  - No lock of ours is held across a CUPTI call: CUPTI may call back into the tracer from
//    inside any of its functions. A context's profiler is driven by one thread at a time (its
//    `transitioning` flag, set and cleared under mutex_, the CUPTI calls in between unlocked).
//    A launch that comes meanwhile is not counted and taints the passes around the switch.
//  - Profiler calls happen on a launching thread of the same context (its context is current
//    there), at context destruction, when another context takes the profiler (on that one's
//    launching thread, as NVIDIA's injection sample does) and, at exit, on the exporter thread.
//    In the last two the context is pushed current around Stop/Decode/Disable (gpu-review D11),
//    as NVIDIA's samples always have it. A closed window's profiler stops at its context's next
//    launch (before that kernel runs): an idle process's last window is decoded at exit.
//  - A communication launch waits (bounded) while another thread switches its context's
//    profiler: that switch may be starting it. Bounded, because the other thread is inside
//    CUPTI; past the bound the kernel cannot be kept out and the window fails (GPU-TODO).
//  - A launch made during stream capture runs no kernel and makes no range: its ordinal is
//    withdrawn when CUPTI reports the graph node it created, inside the launch (D7).
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
  // Windows whose record Collect has handed to the sink so far.
  uint64_t windows_finished() const noexcept {
    return windows_finished_.load(std::memory_order_relaxed);
  }

  // A driver-API kernel or graph launch enters the driver (CUPTI_API_ENTER) on `call.context`;
  // `range` is the launching thread's module range. True when the launch was counted.
  bool OnLaunchEnter(const CUpti_CallbackData& call, bool graph, RangeContext range) noexcept
      FS_EXCLUDES(mutex_);
  // A driver-API memcpy or memset enters the driver on `call.context`. The driver may carry it
  // out with a kernel of its own, which auto-range profiling numbers like any launch though no
  // launch callback announced it (GPU acceptance, H200, 2026-11-26: a torch pass had 10 more
  // ranges than launches). So it ends the running pass, as a communication launch does, and the
  // next launch after its exit resumes. Returns counting_now().
  bool OnMemoryEnter(const CUpti_CallbackData& call) noexcept FS_EXCLUDES(mutex_);
  // The API exit of a launch or of a memcpy/memset.
  void OnLaunchExit(const CUpti_CallbackData& call) noexcept FS_EXCLUDES(mutex_);
  // CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED on this thread: when it comes inside a counted launch,
  // that launch was captured into a graph (stream capture) and runs no kernel now.
  void OnGraphNodeCreated() noexcept FS_EXCLUDES(mutex_);
  void OnContextCreated(CUcontext context, uint32_t device, const std::string& chip) noexcept
      FS_EXCLUDES(mutex_);
  void OnContextDestroying(CUcontext context) noexcept FS_EXCLUDES(mutex_);
  // Exporter thread, every cycle: evaluate ended passes, emit records. `final`: end everything.
  void Collect(bool final) noexcept FS_EXCLUDES(mutex_);

  // CounterWindows
  void OnStepBegin(int64_t step) noexcept override FS_EXCLUDES(mutex_);
  void OnStepEnd(int64_t step) noexcept override FS_EXCLUDES(mutex_);
  ControlAnswer RequestWindow(uint32_t steps, std::string_view metric_set,
                              uint64_t control_id) noexcept override FS_EXCLUDES(mutex_);

  // How long a communication launch waits for another thread's profiler switch to end.
  static constexpr int kExclusionWaitMs = 2000;

 private:
  struct ContextState;
  struct Transition;
  enum class ProfilerInit { kNotYet, kRunning, kReady, kFailed };
  // What a launch is to counting: counted, a graph (a pass of its own), or left out.
  enum class LaunchKind { kCompute, kGraph, kCommunication, kUnchecked };
  // Ends `state`'s running pass before a call that must make no range in it (communication
  // launch, memcpy/memset) and keeps the next one from starting until that call has left the
  // driver. Runs the transition (mutex_ released meanwhile); false when it could not end.
  void PauseFor(ContextState& state, uint64_t correlation_id, bool communication)
      FS_REQUIRES(mutex_);

  LaunchKind Classify(const CUpti_CallbackData& call, bool graph) const;
  ContextState& StateFor(CUcontext context) FS_REQUIRES(mutex_);
  // Under mutex_: what this launch's context needs before the launch can be counted.
  bool Decide(ContextState& state, bool graph, Transition* transition) FS_REQUIRES(mutex_);
  void TakeRunningPass(ContextState& state, Transition* transition) FS_REQUIRES(mutex_);
  // Decided: Execute without mutex_ (released and taken again), then Commit.
  void RunTransition(Transition* transition) FS_REQUIRES(mutex_);
  // Without mutex_: the CUPTI calls.
  void Execute(Transition& transition) noexcept FS_EXCLUDES(mutex_);
  void BeginProfiler(Transition& transition) noexcept FS_EXCLUDES(mutex_);
  // Under mutex_ again: the results recorded, the context released.
  void Commit(Transition& transition) FS_REQUIRES(mutex_);
  void CommitBegin(Transition& transition) FS_REQUIRES(mutex_);
  bool RecordLaunch(ContextState& state, const CUpti_CallbackData& call, bool graph,
                    RangeContext range) FS_REQUIRES(mutex_);
  // A communication (or unchecked) launch: its context's pass ends before it (D1).
  void ExcludeLaunch(CUcontext context, const CUpti_CallbackData& call, LaunchKind kind)
      FS_REQUIRES(mutex_);
  void ExclusionFailed(ContextState& state, const std::string& why) FS_REQUIRES(mutex_);
  // Opens `plan`'s window in the ledger and counts in it, or records why it cannot.
  void OpenWindow(const WindowPlan& plan) FS_REQUIRES(mutex_);
  std::string MultiRankRefusal() const FS_REQUIRES(mutex_);
  void FinishAll() FS_EXCLUDES(mutex_);
  void ReportOnce(const std::string& status) FS_REQUIRES(mutex_);
  void UpdateAttention() FS_REQUIRES(mutex_);
  // Exporter thread: the passes a window on `chip` would take (cached).
  bool PassesFor(const std::string& chip, counters::MetricSetKind set, uint32_t* passes,
                 std::string* error) FS_EXCLUDES(mutex_);

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
  // ContextState's fields are guarded by it too, except what a transition's one thread uses
  // while the context is `transitioning` (context_state.h); the analysis cannot see those.
  Mutex mutex_;
  // Signalled whenever a context's transition is committed (a communication launch waits).
  CondVar transition_done_;
  bool bound_ FS_GUARDED_BY(mutex_) = false;
  // Written under mutex_ before bound_ is set, read afterwards without it by transitions.
  CuptiApi cupti_;
  std::string unavailable_ FS_GUARDED_BY(mutex_) = "CUDA has not initialised in this process yet";
  ProfilerInit profiler_init_ FS_GUARDED_BY(mutex_) = ProfilerInit::kNotYet;
  std::string profiler_init_failure_ FS_GUARDED_BY(mutex_);
  // Set when a multi-rank job's communication kernel could not be kept out of kernel replay:
  // later windows are refused with it (D1).
  std::string exclusion_failure_ FS_GUARDED_BY(mutex_);
  WindowScheduler scheduler_ FS_GUARDED_BY(mutex_);
  WindowLedger ledger_ FS_GUARDED_BY(mutex_);
  uint64_t open_window_ FS_GUARDED_BY(mutex_) = 0;  // ledger id of the open window; 0: none
  counters::MetricSetKind open_set_ FS_GUARDED_BY(mutex_) = counters::MetricSetKind::kCheap;
  bool steps_seen_ FS_GUARDED_BY(mutex_) = false;
  std::map<CUcontext, std::unique_ptr<ContextState>> contexts_ FS_GUARDED_BY(mutex_);
  ContextState* active_ FS_GUARDED_BY(mutex_) = nullptr;  // the context whose profiler is enabled
  std::vector<FlushedPass> flushed_ FS_GUARDED_BY(mutex_);
  std::set<std::string> reported_ FS_GUARDED_BY(mutex_);  // statuses already printed to stderr

  // Read without mutex_ by every launch callback (relaxed: a launch that sees a stale zero just
  // as a window opens goes uncounted, and its range, if the profiler caught it, shows as a count
  // mismatch, never a shifted pair). Written under mutex_. It lives in the tracer when it says
  // so (UseAttentionFlag).
  std::atomic<uint32_t> own_attention_{0};
  std::atomic<uint32_t>* attention_ = &own_attention_;
  // A window is open and some context counts in it; read by launch callbacks of other kinds.
  std::atomic<bool> counting_{false};
  std::atomic<uint64_t> windows_finished_{0};
};

}  // namespace flopscope::injector::cupti
