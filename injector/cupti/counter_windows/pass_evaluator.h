#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "injector/cupti/counter_windows/context_profiler.h"
#include "injector/cupti/counter_windows/counter_backend.h"
#include "injector/cupti/counter_windows/launch_ordinals.h"
#include "injector/cupti/counter_windows/range_profiler_api.h"
#include "injector/records/counter_records.h"

namespace flopscope::injector::cupti {

// One pass of one context's range profiler: its decoded counter data and the launches it
// covered, on its way from the launching thread to the exporter's.
struct FlushedPass {
  uint64_t window_id = 0;
  std::shared_ptr<const CounterPlan> plan;
  DecodedImage data;
  LaunchOrdinals::Pass launches;
  std::string error;  // Stop or DecodeData failed: there is no data, every launch is unmatched
};

// Turns flushed passes into KernelFlops records: reads the number and names of the ranges,
// pairs them with the launches (PairRanges), evaluates each paired range with the Host API and
// turns the values into FLOPs (counters::FlopsFromCounters).
//
// Exporter thread only (the evaluators it keeps are single-threaded); no lock of ours is held
// while it runs.
class PassEvaluator {
 public:
  struct Result {
    std::vector<KernelFlopsRecord> flops;
    uint64_t counted = 0;    // launches that got FLOPs
    uint64_t unmatched = 0;  // launches or ranges that did not pair (or could not be evaluated)
    std::string problem;     // why, when unmatched > 0
    // The first pass of the process that did not pair, described for one stderr line (launches,
    // ranges and their names, drops, taint): what the first GPU runs need to see (gpu-review
    // D14). Empty for every later one.
    std::string diagnostic;
  };

  PassEvaluator(const RangeProfilerApi* api, CounterBackend* backend)
      : api_(api), backend_(backend) {}

  Result Evaluate(const FlushedPass& pass);

 private:
  // Range count and names from the image; false with `error` when CUPTI cannot read it.
  bool ReadRanges(const DecodedImage& data, std::vector<std::string>* names, std::string* error);
  RangeEvaluator* EvaluatorFor(const std::shared_ptr<const CounterPlan>& plan, std::string* error);
  // The values of `range`, or false (counted as unmatched by the caller).
  bool Values(RangeEvaluator* evaluator, const DecodedImage& data, size_t range,
              std::vector<double>* values, std::string* error);

  const RangeProfilerApi* const api_;
  CounterBackend* const backend_;
  struct Evaluator {
    std::shared_ptr<const CounterPlan> plan;  // keeps the key alive
    std::unique_ptr<RangeEvaluator> evaluator;
  };
  std::map<const CounterPlan*, Evaluator> evaluators_;
  bool mismatch_described_ = false;
};

}  // namespace flopscope::injector::cupti
