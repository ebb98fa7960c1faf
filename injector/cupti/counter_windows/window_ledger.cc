#include "injector/cupti/counter_windows/window_ledger.h"

#include <algorithm>

namespace flopscope::injector::cupti {
namespace {

constexpr size_t kMaxStatusBytes = 1024;

}  // namespace

WindowLedger::Window* WindowLedger::Find(uint64_t id) {
  auto it = windows_.find(id);
  return it == windows_.end() ? nullptr : &it->second;
}

uint64_t WindowLedger::Open(const WindowPlan& plan, int64_t now_ns) {
  const uint64_t id = next_id_++;
  Window& window = windows_[id];
  window.record.first_step = plan.first_step;
  window.record.last_step = plan.first_step;
  window.record.trigger = plan.trigger;
  window.record.metric_set = counters::MetricSetName(plan.metric_set);
  window.record.start_ns = now_ns;
  return id;
}

void WindowLedger::StepBegan(uint64_t id, int64_t step) {
  if (Window* window = Find(id))
    window->record.last_step = std::max(window->record.last_step, step);
}

void WindowLedger::Close(uint64_t id, int64_t now_ns, const std::string& status) {
  Window* window = Find(id);
  if (window == nullptr || window->closed) return;
  window->closed = true;
  window->record.end_ns = now_ns;
  if (window->record.status.empty()) window->record.status = status;
}

void WindowLedger::ContextStarted(uint64_t id, const CounterPlan& plan) {
  Window* window = Find(id);
  if (window == nullptr) return;
  window->any_started = true;
  ++window->running;
  window->record.passes = std::max(window->record.passes, plan.passes);
  if (window->chips.insert(plan.chip).second) {
    window->record.chip += (window->record.chip.empty() ? "" : ",") + plan.chip;
  }
}

void WindowLedger::ContextStopped(uint64_t id) {
  Window* window = Find(id);
  if (window != nullptr && window->running > 0) --window->running;
}

void WindowLedger::Failed(uint64_t id, const std::string& status) {
  Window* window = Find(id);
  if (window != nullptr && window->record.status.empty()) window->record.status = status;
}

void WindowLedger::PassQueued(uint64_t id) {
  if (Window* window = Find(id)) ++window->queued;
}

void WindowLedger::PassEvaluated(uint64_t id, uint64_t counted, uint64_t unmatched,
                                 const std::string& problem) {
  Window* window = Find(id);
  if (window == nullptr) return;
  if (window->queued > 0) --window->queued;
  window->record.kernels_counted += counted;
  window->record.ranges_unmatched += unmatched;
  if (window->problem.empty() && unmatched > 0) window->problem = problem;
}

void WindowLedger::LaunchesLost(uint64_t id, uint64_t launches, const std::string& why) {
  Window* window = Find(id);
  if (window == nullptr || launches == 0) return;
  window->record.ranges_unmatched += launches;
  if (window->problem.empty()) window->problem = why;
}

void WindowLedger::CommExcluded(uint64_t id) {
  if (Window* window = Find(id)) ++window->record.comm_kernels_excluded;
}

bool WindowLedger::AnyStarted(uint64_t id) const {
  auto it = windows_.find(id);
  return it != windows_.end() && it->second.any_started;
}

std::vector<CounterWindowRecord> WindowLedger::TakeFinished() {
  std::vector<CounterWindowRecord> finished;
  for (auto it = windows_.begin(); it != windows_.end();) {
    Window& window = it->second;
    if (!window.closed || window.running > 0 || window.queued > 0) {
      ++it;
      continue;
    }
    CounterWindowRecord& record = window.record;
    if (record.status.empty() && record.ranges_unmatched > 0) {
      record.status = std::to_string(record.ranges_unmatched) +
                      " launches or counter ranges not paired (" + window.problem + ")";
    }
    if (record.status.empty() && !window.any_started) {
      record.status = "no kernel was launched during the window";
    }
    // CUPTI's and the planner's texts can be long (a list of chips); the daemon caps names.
    if (record.status.size() > kMaxStatusBytes) record.status.resize(kMaxStatusBytes);
    finished.push_back(std::move(record));
    it = windows_.erase(it);
  }
  return finished;
}

}  // namespace flopscope::injector::cupti
