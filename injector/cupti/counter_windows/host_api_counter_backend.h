#pragma once

#include <functional>
#include <memory>

#include "counters/profiler_host_api.h"
#include "injector/cupti/counter_windows/counter_backend.h"

namespace flopscope::injector::cupti {

// CounterBackend over the CUPTI Profiler Host API (counters::MetricPlanner for plans,
// counters::CounterEvaluator for values). `api` must be complete.
//
// `after_host_api_use`, when given, runs after every plan and evaluator made (whether or not it
// succeeded). Hazard (GPU acceptance, H200, 2026-11-26): libnvperf_host, which the Host API
// calls into, builds static state at its first use and tears it down at exit, in an exit handler
// registered then. Exit handlers run in reverse order, so the tracer's own (which evaluates the
// last window's passes) ran after that teardown and crashed the job in
// cuptiProfilerHostInitialize. The callback lets the session register its handler again, after
// the library's.
std::unique_ptr<CounterBackend> MakeHostApiCounterBackend(
    const counters::ProfilerHostApi& api, std::function<void()> after_host_api_use = nullptr);

}  // namespace flopscope::injector::cupti
