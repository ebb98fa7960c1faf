#include "injector/cupti/counter_windows/counter_collector.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "counters/profiler_host_api.h"
#include "injector/cupti/counter_windows/comm_kernels.h"
#include "injector/cupti/counter_windows/context_state.h"
#include "injector/cupti/counter_windows/host_api_counter_backend.h"
#include "injector/ranges/range_clock.h"
#include "injector/warn.h"

namespace flopscope::injector::cupti {
namespace {

// The launch this thread has inside the driver that holds an ordinal (between its API enter and
// exit callbacks), so that a graph node created meanwhile can be traced back to it (D7).
struct CountedLaunch {
  const void* collector = nullptr;
  CUcontext context = nullptr;
  uint64_t correlation_id = 0;
};
thread_local CountedLaunch t_counted_launch;

}  // namespace

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
      if (ok) {
        backend_ = MakeHostApiCounterBackend(host, [sink = sink_] { sink->RearmExitHandler(); });
      }
    }
    if (ok) {
      api_ = api;
      evaluator_ = std::make_unique<PassEvaluator>(&api_, backend_.get());
    }
    MutexLock lock(&mutex_);
    cupti_ = cupti;
    bound_ = ok;
    if (!ok) unavailable_ = error;
  } catch (...) {
    Unavailable("counter windows could not start (out of memory)");
  }
}

void CounterCollector::Unavailable(const std::string& reason) noexcept {
  try {
    MutexLock lock(&mutex_);
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
    MutexLock lock(&mutex_);
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
    OpenWindow(*plan);
  } catch (...) {
  }
}

void CounterCollector::OpenWindow(const WindowPlan& plan) {
  const uint64_t window = ledger_.Open(plan, RangeClock::RealtimeNs());
  if (settings_.multi_rank() && !exclusion_failure_.empty()) {
    // A window the job asked for before the failure: its record says why it counted nothing.
    scheduler_.Abandon();
    ledger_.Failed(window, MultiRankRefusal());
    ledger_.Close(window, RangeClock::RealtimeNs());
    return;
  }
  open_window_ = window;
  open_set_ = plan.metric_set;
  // Ranges closing from now on are slowed down by kernel replay (until a failure says not).
  counting_.store(true, std::memory_order_relaxed);
  sink_->SetRangesCounted(true);
  UpdateAttention();
}

std::string CounterCollector::MultiRankRefusal() const {
  return "no counter windows in this multi-rank job (WORLD_SIZE=" +
         std::to_string(settings_.world_size) +
         "): a communication kernel could not be kept out of kernel replay, which can hang "
         "every rank (" +
         exclusion_failure_ + ")";
}

void CounterCollector::OnStepEnd(int64_t step) noexcept {
  try {
    MutexLock lock(&mutex_);
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
      MutexLock lock(&mutex_);
      if (!bound_) return {false, "no counter windows: " + unavailable_};
      // Refuses (changing nothing) while a window is open or waiting.
      if ((scheduler_.open_window() != nullptr || scheduler_.pending_request() != nullptr) &&
          !scheduler_.Request(steps, set, control_id, &why)) {
        return {false, why};
      }
      if (profiler_init_ == ProfilerInit::kFailed) return {false, profiler_init_failure_};
      if (settings_.multi_rank() && !exclusion_failure_.empty()) {
        return {false, MultiRankRefusal()};
      }
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
      MutexLock lock(&mutex_);
      if (!scheduler_.Request(steps, set, control_id, &why)) return {false, why};
      seen = steps_seen_;
    }
    std::string message = "counting the next " + std::to_string(steps) +
                          (steps == 1 ? " step (" : " steps (") + counters::MetricSetName(set);
    if (passes > 0) message += ", " + std::to_string(passes) + " passes";
    message += ")";
    if (settings_.multi_rank()) message += "; communication kernels are left out";
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
      MutexLock lock(&mutex_);
      passes.swap(flushed_);
    }
    std::vector<std::pair<uint64_t, PassEvaluator::Result>> results;
    // Evaluation takes host time (one Host API call per range): without our lock.
    for (const FlushedPass& pass : passes) {
      results.emplace_back(pass.window_id, evaluator_->Evaluate(pass));
      if (!results.back().second.diagnostic.empty()) Warn(results.back().second.diagnostic);
    }
    std::vector<KernelFlopsRecord> flops;
    uint64_t unmatched = 0;
    std::vector<CounterWindowRecord> finished;
    {
      MutexLock lock(&mutex_);
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
    windows_finished_.fetch_add(finished.size(), std::memory_order_relaxed);
  } catch (...) {
    // Out of memory: what was taken is lost; the windows' books stay as they were.
  }
}

void CounterCollector::FinishAll() {
  std::vector<Transition> transitions;
  {
    MutexLock lock(&mutex_);
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
        transition.foreign = true;
        transitions.push_back(std::move(transition));
      }
    }
  }
  // At exit no thread of the job is inside a launch, so the profilers are stopped here, on the
  // exporter thread, each with its context pushed current for the calls (foreign: D11).
  for (Transition& transition : transitions) Execute(transition);
  MutexLock lock(&mutex_);
  for (Transition& transition : transitions) Commit(transition);
}

void CounterCollector::ReportOnce(const std::string& status) {
  if (reported_.insert(status).second) Warn(status);
}

CounterCollector::LaunchKind CounterCollector::Classify(const CUpti_CallbackData& call,
                                                        bool graph) const {
  // A multi-rank job's graphs may hold collectives (NCCL under CUDA graphs), and their kernels
  // are not known at launch; neither is a launch's that CUPTI gives no name.
  if (graph) return settings_.multi_rank() ? LaunchKind::kUnchecked : LaunchKind::kGraph;
  if (call.symbolName == nullptr) {
    return settings_.multi_rank() ? LaunchKind::kUnchecked : LaunchKind::kCompute;
  }
  return IsCommunicationKernel(call.symbolName) ? LaunchKind::kCommunication : LaunchKind::kCompute;
}

void CounterCollector::UpdateAttention() {
  bool any = open_window_ != 0;
  for (const auto& [context, state] : contexts_) {
    any = any || state->profiler != nullptr || state->transitioning ||
          !state->pausers_in_flight.empty();
  }
  attention_->store(any ? 1 : 0, std::memory_order_relaxed);
}

// ---- launches, context events and the profiler transitions they cause ----

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
    const bool full = state.launches.size() >= state.profiler->max_ranges();
    // A graph launch makes an unknown number of ranges (GPU-TODO: one per kernel node, or one
    // for the whole graph?): it gets a pass of its own, so either way all its ranges are its.
    const bool isolate = state.graph_pass || (graph && state.launches.size() > 0);
    if (!full && !isolate) return false;
    t->end = t->resume = true;
  } else if (state.paused && wanted && state.window_id == open_window_) {
    t->resume = true;  // the pass ended for a communication launch, now out of the driver
    state.launches.Resumed();
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
  if (!t->end && !t->resume && !t->disable && !t->begin) return false;
  if (t->begin && active_ != nullptr && active_ != &state && active_->profiler != nullptr) {
    // One context's profiler at a time: the other one's pass ends here.
    t->other = std::make_unique<Transition>();
    t->other->state = active_;
    t->other->end = active_->profiler->started();
    t->other->disable = true;
    t->other->foreign = true;  // this thread has `state`'s context current, not that one
    TakeRunningPass(*active_, t->other.get());
    active_->transitioning = true;
    active_->driver = std::this_thread::get_id();
  }
  if (t->begin && profiler_init_ == ProfilerInit::kNotYet) {
    t->initialize = true;
    profiler_init_ = ProfilerInit::kRunning;
  }
  if (t->end || t->disable) TakeRunningPass(state, t);
  state.transitioning = true;
  state.driver = std::this_thread::get_id();
  state.disturbed = false;
  UpdateAttention();
  return true;
}

void CounterCollector::RunTransition(Transition* transition) {
  mutex_.Unlock();
  Execute(*transition);  // CUPTI calls: no lock of ours held
  mutex_.Lock();
  Commit(*transition);
}

void CounterCollector::Execute(Transition& t) noexcept {
  if (t.other != nullptr) Execute(*t.other);
  ContextState& state = *t.state;
  // NVIDIA's samples and tutorial always Stop, Decode and Disable with the profiled context
  // current (gpu-review D11); on a thread where another (or none) is, it is pushed for the calls.
  const bool pushed = t.foreign && api_.ctx_push_current != nullptr &&
                      api_.ctx_pop_current != nullptr &&
                      api_.ctx_push_current(state.context) == CUDA_SUCCESS;
  CuptiFailure failure;
  if (t.end && !state.profiler->EndPass(&t.data, &failure)) {
    t.end_error = DescribeCounterFailure(failure);
    // A pass that would not end before a communication launch: the profiler must go now.
    if (t.pause) t.disable = true;
  }
  if (t.resume) {
    if (!t.end_error.empty() || !state.profiler->Resume(&failure)) {
      if (t.end_error.empty()) t.resume_error = DescribeCounterFailure(failure);
      t.disable = true;  // this window is over for the context
    }
  }
  if (t.disable) {
    CuptiFailure disabling;
    if (!state.profiler->Disable(&disabling)) {
      t.disable_error = disabling.call + " failed (" + disabling.text + ")";
    }
  }
  if (pushed) {
    CUcontext popped = nullptr;
    api_.ctx_pop_current(&popped);
  }
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
  transition_done_.SignalAll();
  const bool disturbed = std::exchange(state.disturbed, false);
  if (t.pause && t.end_error.empty()) state.paused = true;
  if (t.resume && t.end_error.empty() && t.resume_error.empty()) state.paused = false;
  if (t.pause && t.communication && !t.end_error.empty()) ExclusionFailed(state, t.end_error);
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
    if (!t.disable_error.empty()) {
      // Not the window's failure (its passes are decoded already), but what may follow it:
      // the GPU acceptance lost every kernel record after a torch job's window (H200).
      ReportOnce("counter windows: the range profiler could not be disabled: " + t.disable_error +
                 "; kernels launched later on this context may be slowed or come untimed");
    }
    ledger_.ContextStopped(t.ended_window);
    // A pass that could not end or restart will not do better later in the same window.
    if (!t.resume_error.empty() || !t.end_error.empty()) state.failed_window = t.ended_window;
    state.profiler.reset();  // disabled already (Execute): no CUPTI call here
    state.plan.reset();
    state.paused = false;
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
    const LaunchKind kind = Classify(call, graph);
    MutexLock lock(&mutex_);
    if (!bound_) return false;
    if (kind == LaunchKind::kCommunication || kind == LaunchKind::kUnchecked) {
      ExcludeLaunch(call.context, call, kind);
      return false;
    }
    ContextState& state = StateFor(call.context);
    if (state.transitioning) {
      state.disturbed = true;  // its kernel may or may not land in a pass: taints both
      return false;
    }
    if (!state.pausers_in_flight.empty()) {
      // D1: no pass starts before the communication launch has left the driver.
      if (open_window_ != 0) {
        ledger_.LaunchesLost(open_window_, 1,
                             "launched while a communication kernel or a memcpy/memset was inside "
                             "the driver");
      }
      return false;
    }
    Transition transition;
    if (Decide(state, graph, &transition)) RunTransition(&transition);
    if (!RecordLaunch(state, call, graph, range)) return false;
    t_counted_launch = CountedLaunch{this, call.context, call.correlationId};
    return true;
  } catch (...) {
    return false;  // out of memory: this launch is not counted
  }
}

void CounterCollector::ExcludeLaunch(CUcontext context, const CUpti_CallbackData& call,
                                     LaunchKind kind) {
  // Another thread switching this context's profiler may be starting it: wait for its commit.
  // Bounded: that thread is inside CUPTI, which this callback may be holding up (GPU-TODO).
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kExclusionWaitMs);
  ContextState* state = &StateFor(context);
  while (state->transitioning && state->driver != std::this_thread::get_id() &&
         std::chrono::steady_clock::now() < deadline) {
    transition_done_.WaitFor(&mutex_, std::chrono::milliseconds(50));
    state = &StateFor(context);  // the entry may have gone meanwhile (context destroyed)
  }
  if (open_window_ != 0 && kind == LaunchKind::kCommunication) ledger_.CommExcluded(open_window_);
  if (open_window_ != 0 && kind == LaunchKind::kUnchecked) {
    ledger_.LaunchesLost(open_window_, 1,
                         "graph or unnamed launches of a multi-rank job are not counted: they "
                         "may hold communication kernels");
  }
  if (state->transitioning) {
    ExclusionFailed(*state, "the context's profiler was being switched by " +
                                std::string(state->driver == std::this_thread::get_id()
                                                ? "this very thread"
                                                : "another thread for too long"));
    return;
  }
  PauseFor(*state, call.correlationId, /*communication=*/true);
}

void CounterCollector::PauseFor(ContextState& state, uint64_t correlation_id, bool communication) {
  state.pausers_in_flight.push_back(correlation_id);
  UpdateAttention();  // its exit must come back here, window or not
  if (state.profiler == nullptr || !state.profiler->started()) return;
  Transition transition;
  transition.state = &state;
  transition.end = transition.pause = true;
  transition.communication = communication;
  TakeRunningPass(state, &transition);
  state.transitioning = true;
  state.driver = std::this_thread::get_id();
  state.disturbed = false;
  RunTransition(&transition);
}

bool CounterCollector::OnMemoryEnter(const CUpti_CallbackData& call) noexcept {
  if (call.context == nullptr) return counting_now();
  try {
    MutexLock lock(&mutex_);
    if (!bound_) return false;
    auto it = contexts_.find(call.context);
    if (it == contexts_.end()) return counting_now();
    ContextState& state = *it->second;
    // A closed window's profiler runs on until the context's next launch: its pass ends here too.
    const bool running = state.profiler != nullptr && state.profiler->started();
    if (open_window_ == 0 && !running) return counting_now();
    if (state.transitioning) {
      // Another thread is switching the profiler: whether the copy's kernel lands in a pass is
      // unknown, so both passes around the switch are tainted, as for a launch.
      state.disturbed = true;
      return counting_now();
    }
    PauseFor(state, call.correlationId, /*communication=*/false);
  } catch (...) {
    // Out of memory: the copy stays in the pass, whose ranges then cannot pair (never shift).
  }
  return counting_now();
}

void CounterCollector::ExclusionFailed(ContextState& state, const std::string& why) {
  const std::string status = "a communication kernel could not be kept out of kernel replay (" +
                             why + "): counting stopped on this GPU";
  const uint64_t window = open_window_ != 0 ? open_window_ : state.window_id;
  ledger_.Failed(window, status);
  state.failed_window = window;
  ReportOnce(status);
  if (settings_.multi_rank() && exclusion_failure_.empty()) exclusion_failure_ = why;
}

void CounterCollector::OnLaunchExit(const CUpti_CallbackData& call) noexcept {
  if (call.context == nullptr) return;
  const auto* returned = static_cast<const CUresult*>(call.functionReturnValue);
  const bool failed = returned != nullptr && *returned != CUDA_SUCCESS;
  if (t_counted_launch.collector == this && t_counted_launch.correlation_id == call.correlationId) {
    t_counted_launch = CountedLaunch{};
  }
  try {
    MutexLock lock(&mutex_);
    auto it = contexts_.find(call.context);
    if (it == contexts_.end()) return;
    ContextState& state = *it->second;
    state.launches.Exit(call.correlationId, failed);
    auto comm = std::find(state.pausers_in_flight.begin(), state.pausers_in_flight.end(),
                          call.correlationId);
    if (comm != state.pausers_in_flight.end()) {
      state.pausers_in_flight.erase(comm);
      UpdateAttention();
    }
  } catch (...) {
  }
}

void CounterCollector::OnGraphNodeCreated() noexcept {
  const CountedLaunch launch = t_counted_launch;
  if (launch.collector != this) return;
  t_counted_launch = CountedLaunch{};  // one node per captured launch
  try {
    MutexLock lock(&mutex_);
    auto it = contexts_.find(launch.context);
    if (it != contexts_.end()) it->second->launches.Withdraw(launch.correlation_id);
  } catch (...) {
  }
}

void CounterCollector::OnContextCreated(CUcontext context, uint32_t device,
                                        const std::string& chip) noexcept {
  try {
    MutexLock lock(&mutex_);
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
    MutexLock lock(&mutex_);
    auto it = contexts_.find(context);
    if (it == contexts_.end()) return;
    ContextState& state = *it->second;
    state.destroyed = true;
    if (state.transitioning) return;  // its thread commits; the entry stays behind
    Transition transition;
    // On the destroying thread, before the context goes.
    if (Decide(state, false, &transition)) RunTransition(&transition);
    if (state.transitioning) return;
    if (active_ == &state) active_ = nullptr;
    contexts_.erase(context);
    UpdateAttention();
  } catch (...) {
  }
}

}  // namespace flopscope::injector::cupti
