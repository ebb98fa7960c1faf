#pragma once

#include <memory>

#include "counters/profiler_host_api.h"
#include "injector/cupti/counter_windows/counter_backend.h"

namespace flopscope::injector::cupti {

// CounterBackend over the CUPTI Profiler Host API (counters::MetricPlanner for plans,
// counters::CounterEvaluator for values). `api` must be complete.
std::unique_ptr<CounterBackend> MakeHostApiCounterBackend(const counters::ProfilerHostApi& api);

}  // namespace flopscope::injector::cupti
