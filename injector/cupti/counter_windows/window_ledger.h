#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "injector/cupti/counter_windows/counter_backend.h"
#include "injector/cupti/counter_windows/window_scheduler.h"
#include "injector/records/counter_records.h"

namespace flopscope::injector::cupti {

// The books of every counter window from its opening until its record goes out: steps, plans,
// kernels counted and unmatched, and whatever went wrong. A window is finished once it is
// closed, no context's profiler still counts for it and every pass of its data was evaluated:
// only then is its CounterWindowRecord complete.
//
// Not thread-safe: the counter collector keeps it under its mutex.
class WindowLedger {
 public:
  // A window opens; returns its id (> 0).
  uint64_t Open(const WindowPlan& plan, int64_t now_ns);
  // A step began inside the window (the last one so far).
  void StepBegan(uint64_t id, int64_t step);
  // `status`, when not empty, says why the window ended early.
  void Close(uint64_t id, int64_t now_ns, const std::string& status = "");

  // A context's profiler started counting for the window with `plan`.
  void ContextStarted(uint64_t id, const CounterPlan& plan);
  // ... and stopped for good (its last pass is queued, or lost).
  void ContextStopped(uint64_t id);
  // Counting failed on a context (the first reason becomes the window's status).
  void Failed(uint64_t id, const std::string& status);

  void PassQueued(uint64_t id);
  // A queued pass was evaluated: `counted` launches got FLOPs, `unmatched` did not pair, and
  // `problem` says why (kept for the status when nothing failed outright).
  void PassEvaluated(uint64_t id, uint64_t counted, uint64_t unmatched, const std::string& problem);
  // Launches of the window that were never part of a pass (a context that could not start).
  void LaunchesLost(uint64_t id, uint64_t launches, const std::string& why);
  // A communication kernel launched in the window was kept out of counting.
  void CommExcluded(uint64_t id);

  // Whether any context counted for the window (so its ranges are really slowed down).
  bool AnyStarted(uint64_t id) const;
  // Windows still waiting for data (closed or not).
  size_t unfinished() const { return windows_.size(); }

  // The records of the finished windows, which leave the ledger.
  std::vector<CounterWindowRecord> TakeFinished();

 private:
  struct Window {
    CounterWindowRecord record;
    bool closed = false;
    bool any_started = false;
    uint32_t running = 0;  // contexts whose profiler counts for it
    uint32_t queued = 0;   // passes waiting for evaluation
    std::set<std::string> chips;
    std::string problem;  // the first pairing problem
  };
  Window* Find(uint64_t id);

  uint64_t next_id_ = 1;
  std::map<uint64_t, Window> windows_;
};

}  // namespace flopscope::injector::cupti
