#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "counters/metric_catalog.h"

namespace flopscope::injector::cupti {

// What the range profiler collects on one context for one metric set, and what evaluating its
// data needs later (the same chip, metrics and availability image).
struct CounterPlan {
  std::string chip;
  counters::MetricSetKind metric_set = counters::MetricSetKind::kCheap;
  std::vector<std::string> metrics;   // in collection order; values come back in this order
  uint32_t passes = 0;                // kernel-replay passes per kernel
  std::vector<uint8_t> config_image;  // for cuptiRangeProfilerSetConfig
  std::vector<uint8_t> availability;  // the context's counter availability image; may be empty
};

// Turns ranges of decoded counter data images (of one plan) into metric values. Used by one
// thread at a time (the exporter's).
class RangeEvaluator {
 public:
  virtual ~RangeEvaluator() = default;
  // Values of range `range` in plan metric order; false with `error` when CUPTI refuses.
  virtual bool Evaluate(const uint8_t* image, size_t size, size_t range,
                        std::vector<double>* values, std::string* error) = 0;
};

// The host-side counter work the collector needs: choosing metrics per chip and evaluating
// their values. The production backend is the Profiler Host API through flopscope_counters
// (host_api_counter_backend.h); tests script it. Thread-safe: planning happens on launching
// threads, evaluation on the exporter's.
class CounterBackend {
 public:
  virtual ~CounterBackend() = default;
  // Whether `chip` has a metric set at all (no CUPTI work); false with the reason.
  virtual bool SupportsChip(std::string_view chip, std::string* why) = 0;
  // Validates and plans `metric_set` on `chip`; `availability` may be empty (from the chip name
  // alone). False with `error` (the caller then counts nothing: timing only).
  virtual bool Plan(std::string_view chip, counters::MetricSetKind metric_set,
                    const std::vector<uint8_t>& availability, CounterPlan* out,
                    std::string* error) = 0;
  virtual std::unique_ptr<RangeEvaluator> MakeEvaluator(const CounterPlan& plan,
                                                        std::string* error) = 0;
};

}  // namespace flopscope::injector::cupti
