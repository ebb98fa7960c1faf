#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "counters/metric_catalog.h"
#include "injector/cupti/counter_windows/counter_settings.h"

namespace flopscope::injector::cupti {

// One counter window: steps first_step..last_step (inclusive) counted with one metric set.
struct WindowPlan {
  int64_t first_step = -1;
  int64_t last_step = -1;
  counters::MetricSetKind metric_set = counters::MetricSetKind::kCheap;
  std::string trigger;      // "env: steps=3-4", "daemon: control 7"
  uint64_t control_id = 0;  // the daemon's control; 0 for the environment's windows
};

// Decides when counter windows open and close, from step begins and ends alone (no CUPTI).
//
//  - A window opens at the begin of a selected step and closes at the end of its last step;
//    without step marks nothing ever opens.
//  - The environment's windows (FLOPSCOPE_COUNTERS) come at fixed step ordinals. One that would
//    start while another window is open starts at its first step after that window, if any of
//    its steps are left; it never overlaps.
//  - An on-demand window (the daemon) counts the next N steps from the next step begin. Only
//    one can wait at a time and none is taken while a window is open: the request is refused
//    with the reason, so the daemon can tell the user.
//
// Not thread-safe: the counter collector calls it under its own mutex.
class WindowScheduler {
 public:
  explicit WindowScheduler(const CounterSettings& settings);

  // The window that opens at this step, if one does (never while one is open).
  std::optional<WindowPlan> StepBegins(int64_t step);
  // True when this step ends the open window (the window is then closed).
  bool StepEnds(int64_t step);
  // Ends the open window early (e.g. the process is exiting); false when none is open.
  bool Abandon();

  // Counts the next `steps` steps with `metric_set`. False with `refusal` (one sentence) when a
  // window is open or another request waits.
  bool Request(uint32_t steps, counters::MetricSetKind metric_set, uint64_t control_id,
               std::string* refusal);

  const WindowPlan* open_window() const { return open_ ? &*open_ : nullptr; }
  const WindowPlan* pending_request() const { return pending_ ? &*pending_ : nullptr; }
  // How many steps of the pending request (when one waits).
  int64_t pending_steps() const { return pending_steps_; }

 private:
  std::optional<WindowPlan> EnvWindowAt(int64_t step);

  const EnvWindows env_;
  const counters::MetricSetKind env_set_;
  const std::string env_trigger_;
  bool env_single_done_ = false;  // steps=A-B opened already
  int64_t env_every_done_ = 0;    // every=E: the last n whose window [nE, ...] opened
  std::optional<WindowPlan> open_;
  std::optional<WindowPlan> pending_;  // first/last steps filled when it opens
  int64_t pending_steps_ = 0;
};

}  // namespace flopscope::injector::cupti
