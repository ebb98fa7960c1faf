#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "injector/ranges/step_tracker.h"

namespace flopscope::injector {

// The answer to a daemon control (flopscope.v1.ControlReply).
struct ControlAnswer {
  bool accepted = false;
  std::string message;  // "counting the next 2 steps (cheap, 2 passes)", or why not
};

// Counter windows as the session sees them (DESIGN: FLOPs): a few steps during which every
// kernel's hardware counters are collected. Windows open at the push of a selected step and
// close at the pop of their last step (StepListener), chosen by FLOPSCOPE_COUNTERS or asked for
// by the daemon. The implementation is injector/cupti/counter_windows/counter_collector.h; a build without CUPTI
// has none and refuses every request.
class CounterWindows : public StepListener {
 public:
  // An on-demand window: count the next `steps` steps with `metric_set` ("full", "cheap", or ""
  // for the default). Exporter thread; never blocks on the job.
  virtual ControlAnswer RequestWindow(uint32_t steps, std::string_view metric_set,
                                      uint64_t control_id) noexcept = 0;
};

}  // namespace flopscope::injector
