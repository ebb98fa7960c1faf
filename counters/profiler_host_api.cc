#include "counters/profiler_host_api.h"

#include "counters/cupti_symbols.h"

namespace flopscope::counters {
bool ProfilerHostApi::Complete() const {
  return get_result_string && get_supported_chips && initialize && deinitialize &&
         config_add_metrics && get_config_image_size && get_config_image && get_num_of_passes &&
         evaluate_to_gpu_values && get_metric_properties && get_range_name &&
         get_max_metrics_per_pass;
}

std::string ProfilerHostApi::ResultText(CUptiResult result) const {
  return CuptiResultText(get_result_string, result);
}

bool ResolveProfilerHostApi(void* handle, ProfilerHostApi* out, std::string* error) {
  if (handle == nullptr) {
    *error = "libcupti is not open (no handle to resolve the Profiler Host API from)";
    return false;
  }
  ProfilerHostApi api;
  std::string missing;
  ResolveCuptiSymbol(handle, "cuptiGetResultString", &api.get_result_string, &missing);
  ResolveCuptiSymbol(handle, "cuptiProfilerHostGetSupportedChips", &api.get_supported_chips,
                     &missing);
  ResolveCuptiSymbol(handle, "cuptiProfilerHostInitialize", &api.initialize, &missing);
  ResolveCuptiSymbol(handle, "cuptiProfilerHostDeinitialize", &api.deinitialize, &missing);
  ResolveCuptiSymbol(handle, "cuptiProfilerHostConfigAddMetrics", &api.config_add_metrics,
                     &missing);
  ResolveCuptiSymbol(handle, "cuptiProfilerHostGetConfigImageSize", &api.get_config_image_size,
                     &missing);
  ResolveCuptiSymbol(handle, "cuptiProfilerHostGetConfigImage", &api.get_config_image, &missing);
  ResolveCuptiSymbol(handle, "cuptiProfilerHostGetNumOfPasses", &api.get_num_of_passes, &missing);
  ResolveCuptiSymbol(handle, "cuptiProfilerHostEvaluateToGpuValues", &api.evaluate_to_gpu_values,
                     &missing);
  ResolveCuptiSymbol(handle, "cuptiProfilerHostGetMetricProperties", &api.get_metric_properties,
                     &missing);
  ResolveCuptiSymbol(handle, "cuptiProfilerHostGetRangeName", &api.get_range_name, &missing);
  ResolveCuptiSymbol(handle, "cuptiProfilerHostGetMaxNumHardwareMetricsPerPass",
                     &api.get_max_metrics_per_pass, &missing);
  if (!missing.empty()) {
    *error = "this libcupti lacks the Profiler Host API (" + missing +
             "); set FLOPSCOPE_CUPTI_PATH to a CUDA 13 libcupti";
    return false;
  }
  *out = api;
  return true;
}

bool LoadProfilerHostApi(const std::string& explicit_path, ProfilerHostApi* out,
                         std::string* error) {
  CuptiLibrary library;
  return LoadProfilerHostApi(explicit_path, out, &library, error);
}

bool LoadProfilerHostApi(const std::string& explicit_path, ProfilerHostApi* out,
                         CuptiLibrary* library, std::string* error) {
  if (!OpenCuptiLibrary(explicit_path, library, error)) return false;
  if (!ResolveProfilerHostApi(library->handle, out, error)) {
    *error = library->path + ": " + *error;
    return false;
  }
  return true;
}

}  // namespace flopscope::counters
