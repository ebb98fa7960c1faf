#include "counters/metric_planner.h"

#include <algorithm>

#include "counters/host_object.h"

namespace flopscope::counters {
namespace {

std::vector<std::string> WithoutDuplicates(const std::vector<std::string>& names) {
  std::vector<std::string> unique;
  for (const std::string& name : names) {
    if (std::find(unique.begin(), unique.end(), name) == unique.end()) unique.push_back(name);
  }
  return unique;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : ", ") + name;
  return joined;
}

}  // namespace

MetricPlanner::MetricPlanner(const ProfilerHostApi& api) : api_(api) {}

bool MetricPlanner::Plan(std::string_view chip, MetricSetKind kind,
                         const uint8_t* counter_availability, size_t availability_size,
                         MetricPlan* out, std::string* error) {
  std::vector<std::string> candidates;
  if (!CandidateMetrics(chip, kind, &candidates)) {
    *error = UnknownChipMessage(chip);
    return false;
  }
  return PlanMetrics(chip, kind, candidates, counter_availability, availability_size, out, error);
}

bool MetricPlanner::PlanMetrics(std::string_view chip, MetricSetKind kind,
                                const std::vector<std::string>& candidates,
                                const uint8_t* counter_availability, size_t availability_size,
                                MetricPlan* out, std::string* error) {
  MetricPlan plan;
  plan.chip = std::string(chip);
  plan.kind = kind;
  if (!TryEachAlone(chip, candidates, counter_availability, availability_size, &plan.metrics,
                    &plan.rejected, error)) {
    return false;
  }
  if (plan.metrics.empty()) {
    *error = "chip '" + plan.chip + "' accepts none of the " + std::to_string(candidates.size()) +
             " candidate metrics" +
             (plan.rejected.empty()
                  ? std::string()
                  : " (" + plan.rejected.front().first + ": " + plan.rejected.front().second + ")");
    return false;
  }
  HostObject host;
  std::string result_text;
  if (!host.Initialize(api_, chip, counter_availability, availability_size, error)) return false;
  if (!host.AddMetrics(plan.metrics, &result_text)) {
    *error = "chip '" + plan.chip + "' accepts each metric alone but not all together (" +
             result_text + ")";
    return false;
  }
  if (!host.ConfigImage(&plan.config_image, error)) return false;
  CUpti_Profiler_Host_GetNumOfPasses_Params passes{};
  passes.structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE;
  passes.configImageSize = plan.config_image.size();
  passes.pConfigImage = plan.config_image.data();
  const CUptiResult result = api_.get_num_of_passes(&passes);
  if (result != CUPTI_SUCCESS || passes.numOfPasses == 0) {
    *error = "CUPTI could not count the replay passes for chip '" + plan.chip + "' (" +
             api_.ResultText(result) + ")";
    return false;
  }
  plan.passes = static_cast<uint32_t>(passes.numOfPasses);
  *out = std::move(plan);
  return true;
}

bool MetricPlanner::TryEachAlone(std::string_view chip, const std::vector<std::string>& candidates,
                                 const uint8_t* counter_availability, size_t availability_size,
                                 std::vector<std::string>* accepted,
                                 std::vector<std::pair<std::string, std::string>>* rejected,
                                 std::string* error) {
  for (const std::string& candidate : WithoutDuplicates(candidates)) {
    HostObject scratch;
    if (!scratch.Initialize(api_, chip, counter_availability, availability_size, error)) {
      return false;
    }
    std::string result_text;
    if (scratch.AddMetrics({candidate}, &result_text)) {
      accepted->push_back(candidate);
    } else {
      rejected->emplace_back(candidate, result_text);
    }
  }
  return true;
}

bool MetricPlanner::SupportedChips(std::vector<std::string>* out, std::string* error) {
  if (!api_.Complete()) {
    *error = "the Profiler Host API table is incomplete (libcupti not loaded)";
    return false;
  }
  CUpti_Profiler_Host_GetSupportedChips_Params params{};
  params.structSize = CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE;
  const CUptiResult result = api_.get_supported_chips(&params);
  if (result != CUPTI_SUCCESS || (params.numChips > 0 && params.ppChipNames == nullptr)) {
    *error = "CUPTI could not list its supported chips (" + api_.ResultText(result) + ")";
    return false;
  }
  out->clear();
  for (size_t i = 0; i < params.numChips; ++i) {
    if (params.ppChipNames[i] != nullptr) out->emplace_back(params.ppChipNames[i]);
  }
  return true;
}

std::string MetricPlanner::UnknownChipMessage(std::string_view chip) {
  std::vector<std::string> with_family = ChipsWithMetricFamily();
  std::vector<std::string> supported;
  std::string ignored;
  if (SupportedChips(&supported, &ignored)) {
    // Only the chips this libcupti can actually configure are worth suggesting.
    std::erase_if(with_family, [&supported](const std::string& name) {
      return std::find(supported.begin(), supported.end(), name) == supported.end();
    });
  }
  return "no counter metric set for chip '" + std::string(chip) +
         "' (flopscope has metric sets for " + JoinNames(with_family) + ")";
}

}  // namespace flopscope::counters
