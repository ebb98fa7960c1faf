#include "injector/cupti/counter_windows/pass_evaluator.h"

#include <cmath>
#include <utility>

#include "counters/kernel_flop_values.h"
#include "injector/cupti/recorder.h"

namespace flopscope::injector::cupti {
namespace {

// CUPTI's delimiter between nesting levels in range names; auto range has one level.
constexpr const char* kRangeDelimiter = "/";

// A count the daemon accepts: finite and >= 0 (it refuses a whole batch otherwise).
double Count(double value) { return std::isfinite(value) && value > 0 ? value : 0.0; }

KernelFlopsRecord RecordFor(const LaunchMark& mark, counters::KernelFlopValues values) {
  KernelFlopsRecord record;
  record.correlation_id = mark.correlation_id;
  record.path_id = mark.path_id;
  record.range_instance_id = mark.instance_id;
  record.name_id = mark.name_id;
  record.device_id = mark.device_id;
  record.phase_path_id = mark.phase_path_id;
  record.counted_step = mark.step;
  record.fp64 = Count(values.fp64);
  record.fp32 = Count(values.fp32);
  record.fp16 = Count(values.fp16);
  for (auto& [source, flops] : values.tensor) {
    record.tensor.emplace_back(std::move(source), Count(flops));
  }
  // CUPTI gives NaN for a metric it did not collect: such a value is no audit trail.
  for (auto& [metric, value] : values.raw) {
    if (std::isfinite(value)) record.raw.emplace_back(std::move(metric), value);
  }
  return record;
}

PassEvaluator::Result AllUnmatched(const FlushedPass& pass, std::string problem) {
  PassEvaluator::Result result;
  result.unmatched = pass.launches.entries.size();
  result.problem = std::move(problem);
  return result;
}

// One line for the first pass that did not pair: the figures PairRanges judged by.
std::string DescribeMismatch(const FlushedPass& pass, const std::vector<std::string>& names,
                             const std::string& problem) {
  constexpr size_t kShown = 4;
  std::string shown;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) shown += (i > 0 ? "," : "") + names[i];
  if (names.size() > kShown + 1) shown += ",...";
  if (names.size() > kShown) shown += "," + names.back();
  return "first counter pass that did not pair: " + std::to_string(pass.launches.entries.size()) +
         " launches, " + std::to_string(names.size()) + " ranges (" + shown + "), " +
         std::to_string(pass.data.dropped) + " dropped" +
         (pass.launches.taint.empty() ? "" : ", " + pass.launches.taint) + ": " + problem;
}

}  // namespace

bool PassEvaluator::ReadRanges(const DecodedImage& data, std::vector<std::string>* names,
                               std::string* error) {
  CUpti_RangeProfiler_GetCounterDataInfo_Params info{};
  info.structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE;
  info.pCounterDataImage = data.image.data();
  info.counterDataImageSize = data.image.size();
  CUptiResult result = api_->get_counter_data_info(&info);
  if (result != CUPTI_SUCCESS) {
    *error = "cuptiRangeProfilerGetCounterDataInfo failed (" + api_->ResultText(result) + ")";
    return false;
  }
  for (size_t range = 0; range < info.numTotalRanges; ++range) {
    CUpti_RangeProfiler_CounterData_GetRangeInfo_Params params{};
    params.structSize = CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE;
    params.pCounterDataImage = data.image.data();
    params.counterDataImageSize = data.image.size();
    params.rangeIndex = range;
    params.rangeDelimiter = kRangeDelimiter;
    result = api_->get_range_info(&params);
    if (result != CUPTI_SUCCESS) {
      *error =
          "cuptiRangeProfilerCounterDataGetRangeInfo failed (" + api_->ResultText(result) + ")";
      return false;
    }
    names->emplace_back(params.rangeName == nullptr ? "" : params.rangeName);
  }
  return true;
}

RangeEvaluator* PassEvaluator::EvaluatorFor(const std::shared_ptr<const CounterPlan>& plan,
                                            std::string* error) {
  auto it = evaluators_.find(plan.get());
  if (it != evaluators_.end()) return it->second.evaluator.get();
  std::unique_ptr<RangeEvaluator> evaluator = backend_->MakeEvaluator(*plan, error);
  if (evaluator == nullptr) return nullptr;
  RangeEvaluator* raw = evaluator.get();
  evaluators_[plan.get()] = Evaluator{plan, std::move(evaluator)};
  return raw;
}

bool PassEvaluator::Values(RangeEvaluator* evaluator, const DecodedImage& data, size_t range,
                           std::vector<double>* values, std::string* error) {
  values->clear();
  return evaluator->Evaluate(data.image.data(), data.image.size(), range, values, error);
}

PassEvaluator::Result PassEvaluator::Evaluate(const FlushedPass& pass) {
  if (Recorder* recorder = ActiveRecorder()) recorder->RecordPass(pass);  // FLOPSCOPE_RECORD_DIR
  if (!pass.error.empty()) return AllUnmatched(pass, pass.error);
  std::vector<std::string> names;
  std::string error;
  if (!ReadRanges(pass.data, &names, &error)) return AllUnmatched(pass, error);
  const Pairing pairing = PairRanges(pass.launches, names.size(), pass.data.dropped, names);
  Result result;
  result.unmatched = pairing.unmatched;
  result.problem = pairing.problem;
  if (pairing.unmatched > 0 && !std::exchange(mismatch_described_, true)) {
    result.diagnostic = DescribeMismatch(pass, names, pairing.problem);
  }
  if (pairing.pairs.empty() && !pairing.graph_sum) return result;

  RangeEvaluator* evaluator = EvaluatorFor(pass.plan, &error);
  if (evaluator == nullptr) {
    return AllUnmatched(pass, "counter values cannot be evaluated (" + error + ")");
  }
  const std::vector<std::string>& metrics = pass.plan->metrics;
  std::vector<double> values;
  if (pairing.graph_sum) {
    // Every range is a kernel of the one graph launch: their counters add up, and so do the
    // FLOPs made of them (the formulas are linear).
    std::vector<double> sum(metrics.size(), 0.0);
    for (size_t range = 0; range < names.size(); ++range) {
      if (!Values(evaluator, pass.data, range, &values, &error)) {
        return AllUnmatched(pass, "evaluating a counter range failed (" + error + ")");
      }
      for (size_t i = 0; i < sum.size() && i < values.size(); ++i) sum[i] += values[i];
    }
    result.flops.push_back(
        RecordFor(pass.launches.entries[0].mark, counters::FlopsFromCounters(metrics, sum)));
    result.counted = 1;
    return result;
  }
  for (const auto& [entry, range] : pairing.pairs) {
    if (!Values(evaluator, pass.data, range, &values, &error)) {
      ++result.unmatched;
      if (result.problem.empty())
        result.problem = "evaluating a counter range failed (" + error + ")";
      continue;
    }
    result.flops.push_back(
        RecordFor(pass.launches.entries[entry].mark, counters::FlopsFromCounters(metrics, values)));
    ++result.counted;
  }
  return result;
}

}  // namespace flopscope::injector::cupti
