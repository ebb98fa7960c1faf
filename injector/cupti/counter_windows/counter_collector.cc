#include "injector/cupti/counter_windows/counter_collector.h"

#include <cstdio>

#include "counters/profiler_host_api.h"
#include "injector/cupti/counter_windows/context_state.h"
#include "injector/cupti/counter_windows/host_api_counter_backend.h"
#include "injector/ranges/range_clock.h"

namespace flopscope::injector::cupti {

CounterCollector::CounterCollector(TraceSink* sink, CounterSettings settings,
                                   std::optional<RangeProfilerApi> profiler_api,
                                   std::unique_ptr<CounterBackend> backend)
    : sink_(sink),
      settings_(std::move(settings)),
      injected_api_(std::move(profiler_api)),
      backend_(std::move(backend)),
      scheduler_(settings_) {}

// Only tests destroy collectors (the injector's lives as long as its tracer: forever).
CounterCollector::~CounterCollector() = default;

void CounterCollector::Bind(const CuptiApi& cupti, void* cupti_handle) noexcept {
  try {
    std::string error;
    RangeProfilerApi api;
    bool ok = true;
    if (injected_api_.has_value()) {
      api = *injected_api_;
    } else {
      ok = ResolveRangeProfilerApi(cupti_handle, &api, &error);
    }
    // Resolved before bound_ is published; only the exporter thread and launch callbacks that
    // saw bound_ under mutex_ read them afterwards.
    if (ok && backend_ == nullptr) {
      counters::ProfilerHostApi host;
      ok = counters::ResolveProfilerHostApi(cupti_handle, &host, &error);
      if (ok) backend_ = MakeHostApiCounterBackend(host);
    }
    if (ok) {
      api_ = api;
      evaluator_ = std::make_unique<PassEvaluator>(&api_, backend_.get());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    cupti_ = cupti;
    bound_ = ok;
    if (!ok) unavailable_ = error;
  } catch (...) {
    Unavailable("counter windows could not start (out of memory)");
  }
}

void CounterCollector::Unavailable(const std::string& reason) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    bound_ = false;
    unavailable_ = reason;
  } catch (...) {
  }
}

CounterCollector::ContextState& CounterCollector::StateFor(CUcontext context) {
  std::unique_ptr<ContextState>& state = contexts_[context];
  if (state == nullptr) {
    state = std::make_unique<ContextState>();
    state->context = context;
  }
  return *state;
}

// ---- steps and windows ----

void CounterCollector::OnStepBegin(int64_t step) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    steps_seen_ = true;
    if (open_window_ != 0) {
      ledger_.StepBegan(open_window_, step);
      return;
    }
    std::optional<WindowPlan> plan = scheduler_.StepBegins(step);
    if (!plan) return;
    if (!bound_) {
      // Nothing to count with (no CUPTI): the environment's window passes unrecorded.
      scheduler_.Abandon();
      return;
    }
    open_window_ = ledger_.Open(*plan, RangeClock::RealtimeNs());
    open_set_ = plan->metric_set;
    // Ranges closing from now on are slowed down by kernel replay (until a failure says not).
    counting_.store(true, std::memory_order_relaxed);
    sink_->SetRangesCounted(true);
    UpdateAttention();
  } catch (...) {
  }
}

void CounterCollector::OnStepEnd(int64_t step) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!scheduler_.StepEnds(step) || open_window_ == 0) return;
    ledger_.StepBegan(open_window_, step);
    ledger_.Close(open_window_, RangeClock::RealtimeNs());
    open_window_ = 0;
    counting_.store(false, std::memory_order_relaxed);
    sink_->SetRangesCounted(false);
    // Running profilers are stopped at their context's next launch (or at exit), on a thread
    // where that context is current.
    UpdateAttention();
  } catch (...) {
  }
}

bool CounterCollector::PassesFor(const std::string& chip, counters::MetricSetKind set,
                                 uint32_t* passes, std::string* error) {
  auto it = passes_.find({chip, set});
  if (it != passes_.end()) {
    *passes = it->second;
    return true;
  }
  // From the chip name alone (no availability image here): the figure a context's own plan
  // gives may differ by a pass when the device disables some counters.
  CounterPlan plan;
  if (!backend_->Plan(chip, set, {}, &plan, error)) return false;
  passes_[{chip, set}] = plan.passes;
  *passes = plan.passes;
  return true;
}

ControlAnswer CounterCollector::RequestWindow(uint32_t steps, std::string_view metric_set,
                                              uint64_t control_id) noexcept {
  try {
    counters::MetricSetKind set = settings_.metric_set;
    if (!metric_set.empty() && !counters::ParseMetricSetKind(metric_set, &set)) {
      return {false, "unknown metric set '" + std::string(metric_set) + "' (full or cheap)"};
    }
    if (steps == 0 || steps > CounterSettings::kMaxWindowSteps) {
      return {false, "a counter window counts 1 to " +
                         std::to_string(CounterSettings::kMaxWindowSteps) + " steps"};
    }
    std::string chip;
    std::string why;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!bound_) return {false, "no counter windows: " + unavailable_};
      // Refuses (changing nothing) while a window is open or waiting.
      if ((scheduler_.open_window() != nullptr || scheduler_.pending_request() != nullptr) &&
          !scheduler_.Request(steps, set, control_id, &why)) {
        return {false, why};
      }
      if (profiler_init_ == ProfilerInit::kFailed) return {false, profiler_init_failure_};
      if (contexts_.empty()) {
        return {false, "no CUDA context in this process yet (it has not used the GPU)"};
      }
      // No window is open here (the scheduler refused above otherwise): an unfinished one is a
      // closed window whose data is still on its way (its context's next launch stops it).
      if (!flushed_.empty() || ledger_.unfinished() > 0) {
        return {false, "counters busy: the last window's counters are still being decoded"};
      }
      for (const auto& [context, state] : contexts_) {
        if (state->device_known && !state->chip.empty()) chip = state->chip;
      }
    }
    uint32_t passes = 0;
    if (!chip.empty() && !backend_->SupportsChip(chip, &why)) return {false, why};
    if (!chip.empty() && !PassesFor(chip, set, &passes, &why)) {
      return {false, "no counters on " + chip + ": " + why};
    }
    bool seen = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!scheduler_.Request(steps, set, control_id, &why)) return {false, why};
      seen = steps_seen_;
    }
    std::string message = "counting the next " + std::to_string(steps) +
                          (steps == 1 ? " step (" : " steps (") + counters::MetricSetName(set);
    if (passes > 0) message += ", " + std::to_string(passes) + " passes";
    message += ")";
    if (!seen) message += "; no step seen yet: windows open at `step` ranges (flopscope domain)";
    return {true, message};
  } catch (...) {
    return {false, "counter window refused: out of memory"};
  }
}

// ---- exporter cycle ----

void CounterCollector::Collect(bool final) noexcept {
  try {
    if (final) FinishAll();
    std::vector<FlushedPass> passes;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      passes.swap(flushed_);
    }
    std::vector<std::pair<uint64_t, PassEvaluator::Result>> results;
    // Evaluation takes host time (one Host API call per range): without our lock.
    for (const FlushedPass& pass : passes) {
      results.emplace_back(pass.window_id, evaluator_->Evaluate(pass));
    }
    std::vector<KernelFlopsRecord> flops;
    uint64_t unmatched = 0;
    std::vector<CounterWindowRecord> finished;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [window, result] : results) {
        ledger_.PassEvaluated(window, result.counted, result.unmatched, result.problem);
        unmatched += result.unmatched;
        for (KernelFlopsRecord& record : result.flops) flops.push_back(std::move(record));
      }
      finished = ledger_.TakeFinished();
    }
    if (!flops.empty()) sink_->EnqueueFlops(&flops);
    if (unmatched > 0) sink_->CountCounterUnmatched(unmatched);
    for (CounterWindowRecord& window : finished) sink_->WindowClosed(std::move(window));
  } catch (...) {
    // Out of memory: what was taken is lost; the windows' books stay as they were.
  }
}

void CounterCollector::FinishAll() {
  std::vector<Transition> transitions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (open_window_ != 0) {
      scheduler_.Abandon();
      ledger_.Close(open_window_, RangeClock::RealtimeNs(),
                    "the process exited before the window's last step");
      open_window_ = 0;
      counting_.store(false, std::memory_order_relaxed);
      sink_->SetRangesCounted(false);
    }
    for (auto& [context, state] : contexts_) {
      Transition transition;
      if (!state->transitioning && Decide(*state, false, &transition)) {
        transitions.push_back(std::move(transition));
      }
    }
  }
  // GPU-TODO: at exit no thread of the job is inside a launch, so the profilers are stopped
  // here, on the exporter thread, where their context is not current.
  for (Transition& transition : transitions) Execute(transition);
  std::lock_guard<std::mutex> lock(mutex_);
  for (Transition& transition : transitions) Commit(transition);
}

void CounterCollector::ReportOnce(const std::string& status) {
  if (reported_.insert(status).second) std::fprintf(stderr, "flopscope: %s\n", status.c_str());
}

void CounterCollector::UpdateAttention() {
  bool any = open_window_ != 0;
  for (const auto& [context, state] : contexts_) {
    any = any || state->profiler != nullptr || state->transitioning;
  }
  attention_->store(any ? 1 : 0, std::memory_order_relaxed);
}

}  // namespace flopscope::injector::cupti
