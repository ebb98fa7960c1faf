#include "counters/counter_evaluator.h"

#include <utility>

#include "counters/metric_planner.h"

namespace flopscope::counters {
namespace {

// CUPTI trusts counter data images: CUDA 13.0's EvaluateToGpuValues reads a header of this size
// without checking counterDataImageSize and crashes on a shorter image (probed; a zero-filled
// image of this size or more is refused cleanly). It does not validate the contents either, so
// images must come straight from cuptiRangeProfilerDecodeData; this check only keeps a truncated
// buffer from reaching CUPTI. Real images are kilobytes.
constexpr size_t kCounterDataHeaderBytes = 48;

// "rejected alone: NAME (RESULT), ..." or "each metric alone is accepted", for Init's error.
std::string EachMetricAlone(const ProfilerHostApi& api, std::string_view chip,
                            const std::vector<std::string>& metrics) {
  std::vector<std::string> accepted;
  std::vector<std::pair<std::string, std::string>> rejected;
  std::string error;
  if (!MetricPlanner(api).TryEachAlone(chip, metrics, nullptr, 0, &accepted, &rejected, &error)) {
    return error;
  }
  if (rejected.empty()) return "each metric alone is accepted";
  std::string text = "rejected alone: ";
  for (size_t i = 0; i < rejected.size(); ++i) {
    text += (i == 0 ? "" : ", ") + rejected[i].first + " (" + rejected[i].second + ")";
  }
  return text;
}

}  // namespace

bool CounterEvaluator::Init(const ProfilerHostApi& api, std::string_view chip,
                            const std::vector<std::string>& metrics, const uint8_t* availability,
                            size_t size, std::string* error) {
  host_.Reset();
  metrics_.clear();
  metric_names_.clear();
  if (metrics.empty()) {
    *error = "no metrics to evaluate";
    return false;
  }
  if (!host_.Initialize(api, chip, availability, size, error)) return false;
  std::string result_text;
  // The host object evaluates only metrics it was configured with, as the object that built the
  // config image was.
  if (!host_.AddMetrics(metrics, &result_text)) {
    host_.Reset();
    *error = "chip '" + std::string(chip) + "' rejects the metric list (" + result_text + "; " +
             EachMetricAlone(api, chip, metrics) + "); plan it with MetricPlanner first";
    return false;
  }
  metrics_ = metrics;
  metric_names_.reserve(metrics_.size());
  for (const std::string& metric : metrics_) metric_names_.push_back(metric.c_str());
  return true;
}

bool CounterEvaluator::Evaluate(const uint8_t* counter_data, size_t counter_data_size,
                                size_t range_index, std::vector<double>* values,
                                std::string* error) {
  values->clear();
  if (!initialized()) {
    *error = "the counter evaluator is not initialized";
    return false;
  }
  if (counter_data == nullptr || counter_data_size < kCounterDataHeaderBytes) {
    *error = "the counter data image is " + std::to_string(counter_data_size) +
             " bytes, too short to be one that CUPTI decoded";
    return false;
  }
  std::vector<double> evaluated(metrics_.size(), 0.0);
  CUpti_Profiler_Host_EvaluateToGpuValues_Params params{};
  params.structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE;
  params.pHostObject = host_.get();
  params.pCounterDataImage = counter_data;
  params.counterDataImageSize = counter_data_size;
  params.rangeIndex = range_index;
  params.ppMetricNames = metric_names_.data();
  params.numMetrics = metric_names_.size();
  params.pMetricValues = evaluated.data();
  const CUptiResult result = host_.api().evaluate_to_gpu_values(&params);
  if (result != CUPTI_SUCCESS) {
    *error = "CUPTI could not evaluate range " + std::to_string(range_index) +
             " of the counter data (" + host_.api().ResultText(result) + ")";
    return false;
  }
  *values = std::move(evaluated);
  return true;
}

}  // namespace flopscope::counters
