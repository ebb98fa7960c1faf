#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "counters/host_object.h"
#include "counters/profiler_host_api.h"

namespace flopscope::counters {

// Turns decoded counter data images into metric values on the host
// (cuptiProfilerHostEvaluateToGpuValues), for the metrics of one plan on one chip.
//
// Build it from the same chip, metrics and availability image as the config that collected the
// data. Not thread-safe (it owns one CUPTI host object): one evaluator per thread that decodes.
class CounterEvaluator {
 public:
  CounterEvaluator() = default;
  ~CounterEvaluator() = default;  // the host object deinitializes itself
  CounterEvaluator(const CounterEvaluator&) = delete;
  CounterEvaluator& operator=(const CounterEvaluator&) = delete;

  // False with `error` set when the chip cannot be configured or a metric is rejected (the
  // metrics must come from a MetricPlan, which validated them); the error then says which metrics
  // the chip rejects one by one. May be called again to re-target.
  bool Init(const ProfilerHostApi& api, std::string_view chip,
            const std::vector<std::string>& metrics, const uint8_t* availability, size_t size,
            std::string* error);

  // The values of range `range_index` of `counter_data` (after cuptiRangeProfilerDecodeData), in
  // the order of Init's metrics. False with `error` set, `values` cleared, when not initialized,
  // the image is missing or truncated, or CUPTI refuses the image or the index.
  // CUPTI hazard: CUPTI does not validate the image's contents (arbitrary bytes crash it), so
  // pass only the buffer CUPTI decoded into, unmodified.
  bool Evaluate(const uint8_t* counter_data, size_t counter_data_size, size_t range_index,
                std::vector<double>* values, std::string* error);

  bool initialized() const { return host_.get() != nullptr; }
  const std::vector<std::string>& metrics() const { return metrics_; }

 private:
  HostObject host_;
  std::vector<std::string> metrics_;
  std::vector<const char*> metric_names_;  // points into metrics_, for CUPTI's const char**
};

}  // namespace flopscope::counters
