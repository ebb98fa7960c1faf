// CounterCollector, its context half: launches, context events and the profiler transitions
// they cause (see counter_collector.h for the hazards).
#include <utility>

#include "injector/cupti/counter_windows/context_state.h"
#include "injector/cupti/counter_windows/counter_collector.h"

namespace flopscope::injector::cupti {

void CounterCollector::TakeRunningPass(ContextState& state, Transition* transition) {
  transition->ended_window = state.window_id;
  transition->ended_plan = state.plan;
  transition->ended_launches = state.launches.Take();
  state.graph_pass = false;
}

bool CounterCollector::Decide(ContextState& state, bool graph, Transition* t) {
  const bool running = state.profiler != nullptr && state.profiler->started();
  const bool wanted = open_window_ != 0 && state.failed_window != open_window_ && !state.destroyed;
  t->state = &state;
  if (running && wanted && state.window_id == open_window_) {
    const bool full = state.launches.size() >= settings_.max_ranges;
    // A graph launch makes an unknown number of ranges (GPU-TODO: one per kernel node, or one
    // for the whole graph?): it gets a pass of its own, so either way all its ranges are its.
    const bool isolate = state.graph_pass || (graph && state.launches.size() > 0);
    if (!full && !isolate) return false;
    t->end = t->resume = true;
  } else if (state.profiler != nullptr) {  // its window is over (or it stopped after a failure)
    t->end = running;
    t->disable = true;
    t->begin = wanted;
  } else {
    t->begin = wanted;
  }
  if (t->begin) {
    t->window = open_window_;
    t->metric_set = open_set_;
    // Not now (this launch goes uncounted, the context tries again at its next one) while
    // another thread initialises the profiler or switches the other context's, nor ever once
    // the profiler could not be initialised.
    const bool other_busy = active_ != nullptr && active_ != &state &&
                            active_->profiler != nullptr && active_->transitioning;
    if (profiler_init_ == ProfilerInit::kRunning || profiler_init_ == ProfilerInit::kFailed ||
        other_busy) {
      t->begin = false;
    }
  }
  if (!t->end && !t->disable && !t->begin) return false;
  if (t->begin && active_ != nullptr && active_ != &state && active_->profiler != nullptr) {
    // One context's profiler at a time: the other one's pass ends here.
    t->other = std::make_unique<Transition>();
    t->other->state = active_;
    t->other->end = active_->profiler->started();
    t->other->disable = true;
    TakeRunningPass(*active_, t->other.get());
    active_->transitioning = true;
  }
  if (t->begin && profiler_init_ == ProfilerInit::kNotYet) {
    t->initialize = true;
    profiler_init_ = ProfilerInit::kRunning;
  }
  if (t->end || t->disable) TakeRunningPass(state, t);
  state.transitioning = true;
  state.disturbed = false;
  UpdateAttention();
  return true;
}

void CounterCollector::Execute(Transition& t) noexcept {
  if (t.other != nullptr) Execute(*t.other);
  ContextState& state = *t.state;
  CuptiFailure failure;
  if (t.end && !state.profiler->EndPass(&t.data, &failure)) {
    t.end_error = DescribeCounterFailure(failure);
  }
  if (t.resume) {
    if (!t.end_error.empty() || !state.profiler->Resume(&failure)) {
      if (t.end_error.empty()) t.resume_error = DescribeCounterFailure(failure);
      t.disable = true;  // this window is over for the context
    }
  }
  if (t.disable) state.profiler->Disable();
  if (t.begin) BeginProfiler(t);
}

void CounterCollector::BeginProfiler(Transition& t) noexcept {
  ContextState& state = *t.state;
  CuptiFailure failure;
  try {
    if (t.initialize) {
      CUpti_Profiler_Initialize_Params params{};
      params.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
      const CUptiResult result = api_.profiler_initialize(&params);
      t.initialized = result == CUPTI_SUCCESS;
      if (!t.initialized) {
        t.begin_error = DescribeCounterFailure(
            CuptiFailure{"cuptiProfilerInitialize", result, api_.ResultText(result)});
        return;
      }
    }
    if (!state.device_known) {  // the tracer attached after the context was created
      uint32_t device = 0;
      CUpti_Device_GetChipName_Params chip{};
      chip.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
      if (cupti_.get_device_id(state.context, &device) == CUPTI_SUCCESS) {
        chip.deviceIndex = device;
        if (cupti_.device_get_chip_name(&chip) == CUPTI_SUCCESS && chip.pChipName != nullptr) {
          state.device = device;
          state.chip = chip.pChipName;
          state.device_known = true;
        }
      }
    }
    if (!state.availability_known) {
      if (!ContextProfiler::CounterAvailability(api_, state.context, &state.availability,
                                                &failure)) {
        t.begin_error = DescribeCounterFailure(failure);
        return;
      }
      state.availability_known = true;
    }
    std::shared_ptr<const CounterPlan>& plan = state.plans[t.metric_set];
    if (plan == nullptr) {
      auto planned = std::make_shared<CounterPlan>();
      std::string error;
      if (!backend_->Plan(state.chip, t.metric_set, state.availability, planned.get(), &error)) {
        t.begin_error =
            "no counters on " + (state.chip.empty() ? "this device" : state.chip) + ": " + error;
        return;
      }
      plan = std::move(planned);
    }
    auto profiler = std::make_unique<ContextProfiler>(&api_, state.context);
    if (!profiler->Begin(*plan, settings_.max_ranges, &failure)) {
      t.begin_error = DescribeCounterFailure(failure);
      return;
    }
    t.new_profiler = std::move(profiler);
    t.new_plan = plan;
    t.begun = true;
  } catch (...) {
    t.begin_error = "counter collection could not start (out of memory)";
  }
}

void CounterCollector::Commit(Transition& t) {
  if (t.other != nullptr) Commit(*t.other);
  ContextState& state = *t.state;
  // Released first: whatever fails below, the context must not stay locked out.
  state.transitioning = false;
  const bool disturbed = std::exchange(state.disturbed, false);
  if (t.end || t.disable) {
    FlushedPass pass{t.ended_window, t.ended_plan, std::move(t.data), std::move(t.ended_launches),
                     t.end_error};
    if (disturbed && pass.launches.taint.empty()) {
      pass.launches.taint = "a launch came while the profiler was being switched";
    }
    if (!t.end_error.empty()) ledger_.Failed(t.ended_window, t.end_error);
    if (!t.resume_error.empty()) ledger_.Failed(t.ended_window, t.resume_error);
    if (t.end) {
      ledger_.PassQueued(t.ended_window);
      flushed_.push_back(std::move(pass));
    } else {
      ledger_.LaunchesLost(t.ended_window, pass.launches.entries.size(), "the profiler stopped");
    }
  }
  if (t.disable) {
    ledger_.ContextStopped(t.ended_window);
    // A pass that could not end or restart will not do better later in the same window.
    if (!t.resume_error.empty() || !t.end_error.empty()) state.failed_window = t.ended_window;
    state.profiler.reset();  // disabled already (Execute): no CUPTI call here
    state.plan.reset();
    state.window_id = 0;
    if (active_ == &state) active_ = nullptr;
  }
  if (t.initialize) {
    profiler_init_ = t.initialized ? ProfilerInit::kReady : ProfilerInit::kFailed;
    if (!t.initialized) profiler_init_failure_ = t.begin_error;
  }
  if (t.begin) CommitBegin(t);
  if (disturbed && state.profiler != nullptr) {
    state.launches.Taint("a launch came while the profiler was being switched");
  }
  UpdateAttention();
}

void CounterCollector::CommitBegin(Transition& t) {
  ContextState& state = *t.state;
  if (t.begun) {
    state.profiler = std::move(t.new_profiler);
    state.plan = t.new_plan;
    state.window_id = t.window;
    active_ = &state;
    ledger_.ContextStarted(t.window, *t.new_plan);
    return;
  }
  state.failed_window = t.window;
  ledger_.Failed(t.window, t.begin_error);
  ReportOnce(t.begin_error);
  // Nothing counts in this window after all: its ranges are not slowed down.
  if (open_window_ == t.window && !ledger_.AnyStarted(t.window)) {
    counting_.store(false, std::memory_order_relaxed);
    sink_->SetRangesCounted(false);
  }
}

bool CounterCollector::RecordLaunch(ContextState& state, const CUpti_CallbackData& call, bool graph,
                                    RangeContext range) {
  if (open_window_ == 0 || state.window_id != open_window_ || state.profiler == nullptr ||
      !state.profiler->started()) {
    return false;
  }
  const PhaseContext phase = sink_->CurrentPhase();
  LaunchMark mark;
  mark.correlation_id = call.correlationId;
  mark.path_id = range.path_id;
  mark.instance_id = range.instance_id;
  mark.name_id = graph || call.symbolName == nullptr ? 0 : sink_->InternName(call.symbolName);
  mark.device_id = state.device;
  mark.phase_path_id = phase.phase_path_id;
  mark.step = phase.step;
  state.launches.Enter(mark, graph);
  state.graph_pass = graph;
  return true;
}

bool CounterCollector::OnLaunchEnter(const CUpti_CallbackData& call, bool graph,
                                     RangeContext range) noexcept {
  if (call.context == nullptr) return false;
  try {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!bound_) return false;
    ContextState& state = StateFor(call.context);
    if (state.transitioning) {
      state.disturbed = true;  // its kernel may or may not land in a pass: taints both
      return false;
    }
    Transition transition;
    if (Decide(state, graph, &transition)) {
      lock.unlock();
      Execute(transition);  // CUPTI calls: no lock of ours held
      lock.lock();
      Commit(transition);
    }
    return RecordLaunch(state, call, graph, range);
  } catch (...) {
    return false;  // out of memory: this launch is not counted
  }
}

void CounterCollector::OnLaunchExit(const CUpti_CallbackData& call) noexcept {
  if (call.context == nullptr) return;
  const auto* returned = static_cast<const CUresult*>(call.functionReturnValue);
  const bool failed = returned != nullptr && *returned != CUDA_SUCCESS;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = contexts_.find(call.context);
    if (it != contexts_.end()) it->second->launches.Exit(call.correlationId, failed);
  } catch (...) {
  }
}

void CounterCollector::OnContextCreated(CUcontext context, uint32_t device,
                                        const std::string& chip) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    ContextState& state = StateFor(context);
    if (state.transitioning) return;
    state.device = device;
    state.chip = chip;
    state.device_known = true;
  } catch (...) {
  }
}

void CounterCollector::OnContextDestroying(CUcontext context) noexcept {
  try {
    std::unique_lock<std::mutex> lock(mutex_);
    auto it = contexts_.find(context);
    if (it == contexts_.end()) return;
    ContextState& state = *it->second;
    state.destroyed = true;
    if (state.transitioning) return;  // its thread commits; the entry stays behind
    Transition transition;
    if (Decide(state, false, &transition)) {
      lock.unlock();
      Execute(transition);  // on the destroying thread, before the context goes
      lock.lock();
      Commit(transition);
    }
    if (state.transitioning) return;
    if (active_ == &state) active_ = nullptr;
    contexts_.erase(context);
    UpdateAttention();
  } catch (...) {
  }
}

}  // namespace flopscope::injector::cupti
