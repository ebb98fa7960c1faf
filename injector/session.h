#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "common/made_counts_page.h"
#include "injector/export/exporter.h"
#include "injector/injector_config.h"
#include "injector/kernel_api_sink.h"
#include "injector/kernel_tracing.h"
#include "injector/ranges/domain_registry.h"
#include "injector/ranges/path_table.h"
#include "injector/ranges/range_clock.h"
#include "injector/ranges/range_tracker.h"
#include "injector/ranges/step_tracker.h"
#include "injector/records/identity.h"
#include "injector/records/loss_counters.h"
#include "injector/records/string_table.h"
#include "injector/records/thread_buffer.h"

namespace flopscope::injector {

// One profiled process: its identity, the range state shared by every NVTX instance, the buffers,
// kernel tracing and the exporter. Started lazily by the first InitializeInjectionNvtx2 or
// InitializeInjection, never destroyed (application threads may call in until the very end of
// the process).
class Session {
 public:
  // What started the session: the first NVTX call, or the CUDA driver initialising (which is
  // the moment kernel tracing attaches, before the job's first context exists).
  enum class StartReason { kNvtx, kCudaInit };

  // The running session, or null (none started, or disabled in a forked child). One atomic load:
  // this is on every NVTX call.
  static Session* Current() { return current_.load(std::memory_order_acquire); }
  // Starts the session on first use (reading the environment, starting the exporter thread);
  // null when the injector is disabled in this process or cannot start.
  static Session* StartOnce(StartReason reason = StartReason::kNvtx) noexcept;
  // The process is ending: final batch, bounded wait for acks, spool (once; nothing in a forked
  // child). The atexit handler, and the _exit / exec wrappers of entry_points.cc.
  static void OnProcessExit();
  // SIGTERM's drain (sigterm_drain.h), on a thread of the injector: the exit path with its wait
  // for acknowledgements cut to fit SigtermDrain::kBoundMs; when another thread runs the exit
  // path already (exit() came first), waits for it instead. Returns once it is done.
  static void DrainOnSigterm();
  // The process is about to die of `signo` (SIGTERM or SIGINT; others are ignored): says so in
  // the final batch (`process.end_signal` metadata) and in the made-counts file (for a drain
  // that never delivers it). Before the exit path runs.
  static void NameEndSignal(int signo);
  // Registers the tracer's exit handler again, so that it runs before the exit handlers
  // registered since (TraceSink::RearmExitHandler). At most kMaxTracingExitRearms times.
  static void RearmTracingExit() noexcept;
  static constexpr int kMaxTracingExitRearms = 64;

  // InitializeInjection: attaches kernel tracing if the session's start did not already (the
  // session began at an earlier NVTX call). The outcome goes out as `gpu.status` metadata.
  void OnCudaInitialized() noexcept;

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  DomainRegistry& domains() { return domains_; }
  RangeTracker& tracker() { return tracker_; }
  PathTable& paths() { return paths_; }
  StringTable& strings() { return strings_; }
  LossCounters& losses() { return losses_; }
  BufferRegistry& buffers() { return buffers_; }
  StepTracker& steps() { return steps_; }
  // Null until the exporter is running (application threads may ask before that).
  Exporter* exporter() { return running_exporter_.load(std::memory_order_acquire); }
  const SessionIdentity& identity() const { return identity_; }
  const std::string& gpu_status() const { return gpu_status_; }

 private:
  Session(InjectorConfig config, SessionIdentity identity);
  // The slow, side-effecting half of the start (GPU probe, kernel tracing, exporter thread, exit
  // and fork handlers); runs after the session is published.
  void StartBackground(StartReason reason);
  // Why there are (or are not) kernels, as the hello says it; attaches tracing when it is time.
  std::string InitialGpuStatus(StartReason reason);
  // Attaches kernel tracing, logs a failure in one line and announces the outcome as metadata.
  std::string AttachKernelTracing();
  std::unique_ptr<BatchSink> MakeSink() const;
  // A daemon's counter-window control, answered by kernel tracing's counter windows.
  ControlAnswer RequestCounterWindow(uint32_t steps, std::string_view metric_set,
                                     uint64_t control_id);

  static void WakeExporter(void* session);
  // The atexit handler registered after kernel tracing attached (KernelTracing::FinishAtExit).
  static void OnTracingExit();
  static void OnForkChild();

  // The exit path's body (OnProcessExit runs it once).
  static void RunExitPath();

  static inline std::atomic<Session*> current_{nullptr};
  static inline std::atomic<bool> disabled_{false};
  static inline std::atomic<bool> exit_done_{false};  // the exit path has run to its end

  const InjectorConfig config_;
  const SessionIdentity identity_;
  std::string gpu_status_;
  LossCounters losses_;
  RangeClock clock_;
  DomainRegistry domains_;
  PathTable paths_;
  StringTable strings_;
  // `<spool dir>/<session>.made`: every record the buffers accept is counted in it, so that what
  // a SIGKILL leaves in them is counted too (daemon/ingest/spool_collector.h). Made before the
  // session is published; declared before buffers_, which it outlives. Null without a spool.
  std::unique_ptr<MadeCountsPage> made_counts_;
  BufferRegistry buffers_;
  StepTracker steps_;
  RangeTracker tracker_;
  KernelApiSink trace_sink_;
  // Declared before tracing_: its construction writes into them (members are built in
  // declaration order, and writing into one not built yet is undefined).
  std::string tracing_unavailable_;  // why tracing_ is null
  std::vector<std::string> tracing_warnings_;
  // Made in the constructor (no CUDA work), before the session is published: InitializeInjection
  // may reach it from another thread as soon as it is. Null without CUPTI or when turned off.
  std::unique_ptr<KernelTracing> tracing_;
  std::unique_ptr<Exporter> exporter_;  // written once, by the starting thread
  std::atomic<Exporter*> running_exporter_{nullptr};
};

}  // namespace flopscope::injector
