#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "injector/domain_registry.h"
#include "injector/exporter.h"
#include "injector/identity.h"
#include "injector/injector_config.h"
#include "injector/loss_counters.h"
#include "injector/path_table.h"
#include "injector/range_clock.h"
#include "injector/range_tracker.h"
#include "injector/string_table.h"
#include "injector/thread_buffer.h"

namespace flopscope::injector {

// One profiled process: its identity, the range state shared by every NVTX instance, the buffers
// and the exporter. Started lazily by the first InitializeInjectionNvtx2 or InitializeInjection,
// never destroyed (application threads may call in until the very end of the process).
class Session {
 public:
  // The running session, or null (none started, or disabled in a forked child). One atomic load:
  // this is on every NVTX call.
  static Session* Current() { return current_.load(std::memory_order_acquire); }
  // Starts the session on first use (reading the environment, starting the exporter thread);
  // null when the injector is disabled in this process or cannot start.
  static Session* StartOnce() noexcept;

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  DomainRegistry& domains() { return domains_; }
  RangeTracker& tracker() { return tracker_; }
  PathTable& paths() { return paths_; }
  StringTable& strings() { return strings_; }
  LossCounters& losses() { return losses_; }
  BufferRegistry& buffers() { return buffers_; }
  // Null until the exporter is running (application threads may ask before that).
  Exporter* exporter() { return running_exporter_.load(std::memory_order_acquire); }
  const SessionIdentity& identity() const { return identity_; }
  const std::string& gpu_status() const { return gpu_status_; }

 private:
  Session(InjectorConfig config, SessionIdentity identity);
  // The slow, side-effecting half of the start (GPU probe, exporter thread, exit and fork
  // handlers); runs after the session is published.
  void StartBackground();
  std::unique_ptr<BatchSink> MakeSink() const;

  static void WakeExporter(void* session);
  static void OnProcessExit();
  static void OnForkChild();

  static inline std::atomic<Session*> current_{nullptr};
  static inline std::atomic<bool> disabled_{false};

  const InjectorConfig config_;
  const SessionIdentity identity_;
  std::string gpu_status_;
  LossCounters losses_;
  RangeClock clock_;
  DomainRegistry domains_;
  PathTable paths_;
  StringTable strings_;
  BufferRegistry buffers_;
  RangeTracker tracker_;
  std::unique_ptr<Exporter> exporter_;  // written once, by the starting thread
  std::atomic<Exporter*> running_exporter_{nullptr};
};

}  // namespace flopscope::injector
