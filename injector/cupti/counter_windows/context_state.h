#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "counters/metric_catalog.h"
#include "injector/cupti/counter_windows/context_profiler.h"
#include "injector/cupti/counter_windows/counter_backend.h"
#include "injector/cupti/counter_windows/counter_collector.h"
#include "injector/cupti/counter_windows/launch_ordinals.h"

namespace flopscope::injector::cupti {

// What the counter collector knows about one CUDA context. Guarded by the collector's mutex,
// except that while `transitioning` is set the one thread driving the transition also uses the
// profiler, plans and availability without it (no other thread touches them then).
struct CounterCollector::ContextState {
  CUcontext context = nullptr;
  uint32_t device = 0;
  std::string chip;
  bool device_known = false;
  std::vector<uint8_t> availability;  // cuptiProfilerGetCounterAvailability, asked once
  bool availability_known = false;
  std::map<counters::MetricSetKind, std::shared_ptr<const CounterPlan>> plans;

  std::unique_ptr<ContextProfiler> profiler;  // enabled (started or not)
  uint64_t window_id = 0;                     // the window it counts for
  std::shared_ptr<const CounterPlan> plan;    // its plan
  LaunchOrdinals launches;                    // of its current pass
  bool graph_pass = false;  // the current pass is one graph launch's: end it at the next launch
  // The pass ended before a communication launch (D1) or a memcpy/memset; the profiler stays
  // enabled for the window and Resumes at the next launch once none of them is inside the driver.
  bool paused = false;
  std::vector<uint64_t> pausers_in_flight;  // correlation ids of those still inside the driver

  bool transitioning = false;  // a thread is driving the profiler without the lock
  std::thread::id driver;      // that thread
  bool disturbed = false;      // a launch came meanwhile (it was not counted)
  uint64_t failed_window = 0;  // counting failed here for this window: not tried again in it
  bool destroyed = false;
};

// One switch of a context's profiler: decided under the lock (Decide), done without it
// (Execute), recorded under it (Commit).
struct CounterCollector::Transition {
  ContextState* state = nullptr;
  // Decided:
  bool end = false;            // Stop and decode the running pass
  bool resume = false;         // then start the next pass (the same window goes on)
  bool disable = false;        // then disable the profiler
  bool pause = false;          // with end: keep the profiler enabled, stopped (D1)
  bool communication = false;  // the pause is for a communication launch: failing to end is fatal
  bool foreign = false;        // the context is not current on this thread: push it (D11)
  bool begin = false;          // enable and start it for `window`
  bool initialize = false;     // cuptiProfilerInitialize first (the first start in the process)
  uint64_t ended_window = 0;
  std::shared_ptr<const CounterPlan> ended_plan;
  LaunchOrdinals::Pass ended_launches;
  uint64_t window = 0;
  counters::MetricSetKind metric_set = counters::MetricSetKind::kCheap;
  std::unique_ptr<Transition> other;  // another context's profiler to end first (one at a time)
  // Done:
  DecodedImage data;
  std::string end_error;      // Stop/Decode failed
  std::string resume_error;   // the next pass did not start
  std::string disable_error;  // Stop or Disable failed while disabling: the profiler may linger
  bool initialized = false;
  bool begun = false;
  std::string begin_error;  // why it did not start (status for the window)
  std::unique_ptr<ContextProfiler> new_profiler;
  std::shared_ptr<const CounterPlan> new_plan;
};

}  // namespace flopscope::injector::cupti
