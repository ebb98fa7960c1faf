#include "injector/cupti/counter_windows/window_scheduler.h"

namespace flopscope::injector::cupti {
namespace {

std::string Steps(const WindowPlan& plan) {
  if (plan.first_step == plan.last_step) return "step " + std::to_string(plan.first_step);
  return "steps " + std::to_string(plan.first_step) + "-" + std::to_string(plan.last_step);
}

}  // namespace

WindowScheduler::WindowScheduler(const CounterSettings& settings)
    : env_(settings.windows),
      env_set_(settings.metric_set),
      env_trigger_("env: " + settings.text) {}

std::optional<WindowPlan> WindowScheduler::EnvWindowAt(int64_t step) {
  if (!env_.any) return std::nullopt;
  WindowPlan plan;
  plan.metric_set = env_set_;
  plan.trigger = env_trigger_;
  plan.first_step = step;
  if (env_.every > 0) {
    const int64_t n = step / env_.every;
    const int64_t last = n * env_.every + env_.count - 1;
    if (n < 1 || n <= env_every_done_ || step > last) return std::nullopt;
    env_every_done_ = n;
    plan.last_step = last;
    return plan;
  }
  if (env_single_done_ || step < env_.first || step > env_.last) return std::nullopt;
  env_single_done_ = true;
  plan.last_step = env_.last;
  return plan;
}

std::optional<WindowPlan> WindowScheduler::StepBegins(int64_t step) {
  if (open_) return std::nullopt;
  // The daemon's request first: someone is waiting for it. An environment window it displaces
  // still gets the steps of its range that are left after it.
  if (pending_) {
    open_ = std::move(pending_);
    pending_.reset();
    open_->first_step = step;
    open_->last_step = step + pending_steps_ - 1;
    pending_steps_ = 0;
    return open_;
  }
  open_ = EnvWindowAt(step);
  return open_;
}

bool WindowScheduler::StepEnds(int64_t step) {
  if (!open_ || step < open_->last_step) return false;
  open_.reset();
  return true;
}

bool WindowScheduler::Abandon() {
  const bool was_open = open_.has_value();
  open_.reset();
  return was_open;
}

bool WindowScheduler::Request(uint32_t steps, counters::MetricSetKind metric_set,
                              uint64_t control_id, std::string* refusal) {
  if (steps == 0) {
    *refusal = "a counter window needs at least 1 step";
    return false;
  }
  if (open_) {
    *refusal = "a counter window is already open (" + Steps(*open_) + ", " + open_->trigger + ")";
    return false;
  }
  if (pending_) {
    *refusal = "a counter window is already waiting for the next step (" + pending_->trigger + ")";
    return false;
  }
  WindowPlan plan;
  plan.metric_set = metric_set;
  plan.trigger = "daemon: control " + std::to_string(control_id);
  plan.control_id = control_id;
  pending_ = std::move(plan);
  pending_steps_ = steps;
  return true;
}

}  // namespace flopscope::injector::cupti
