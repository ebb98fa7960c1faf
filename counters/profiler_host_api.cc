#include "counters/profiler_host_api.h"

#include <dlfcn.h>

namespace flopscope::counters {
namespace {

template <typename Fn>
void Resolve(void* handle, const char* name, Fn* slot, std::string* missing) {
  *slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*slot != nullptr) return;
  if (!missing->empty()) *missing += ", ";
  *missing += name;
}

}  // namespace

bool ProfilerHostApi::Complete() const {
  return get_result_string && get_supported_chips && initialize && deinitialize &&
         config_add_metrics && get_config_image_size && get_config_image && get_num_of_passes &&
         evaluate_to_gpu_values && get_metric_properties && get_range_name &&
         get_max_metrics_per_pass;
}

std::string ProfilerHostApi::ResultText(CUptiResult result) const {
  const char* text = nullptr;
  if (get_result_string != nullptr && get_result_string(result, &text) == CUPTI_SUCCESS &&
      text != nullptr) {
    return text;
  }
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

bool ResolveProfilerHostApi(void* handle, ProfilerHostApi* out, std::string* error) {
  if (handle == nullptr) {
    *error = "libcupti is not open (no handle to resolve the Profiler Host API from)";
    return false;
  }
  ProfilerHostApi api;
  std::string missing;
  Resolve(handle, "cuptiGetResultString", &api.get_result_string, &missing);
  Resolve(handle, "cuptiProfilerHostGetSupportedChips", &api.get_supported_chips, &missing);
  Resolve(handle, "cuptiProfilerHostInitialize", &api.initialize, &missing);
  Resolve(handle, "cuptiProfilerHostDeinitialize", &api.deinitialize, &missing);
  Resolve(handle, "cuptiProfilerHostConfigAddMetrics", &api.config_add_metrics, &missing);
  Resolve(handle, "cuptiProfilerHostGetConfigImageSize", &api.get_config_image_size, &missing);
  Resolve(handle, "cuptiProfilerHostGetConfigImage", &api.get_config_image, &missing);
  Resolve(handle, "cuptiProfilerHostGetNumOfPasses", &api.get_num_of_passes, &missing);
  Resolve(handle, "cuptiProfilerHostEvaluateToGpuValues", &api.evaluate_to_gpu_values, &missing);
  Resolve(handle, "cuptiProfilerHostGetMetricProperties", &api.get_metric_properties, &missing);
  Resolve(handle, "cuptiProfilerHostGetRangeName", &api.get_range_name, &missing);
  Resolve(handle, "cuptiProfilerHostGetMaxNumHardwareMetricsPerPass", &api.get_max_metrics_per_pass,
          &missing);
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
