#pragma once

#include <cupti_profiler_host.h>
#include <cupti_result.h>

#include <string>

#include "counters/cupti_library.h"

namespace flopscope::counters {

// The CUPTI Profiler Host API entries flopscope uses, as a table of function pointers resolved
// from a dlopen'ed libcupti (cupti_library.h says why the injector never links libcupti). The
// Host API needs no GPU and no driver: it answers from the chip name (and, on a device, its
// counter availability image), which is what lets `flopscope counters` and the unit tests run
// anywhere the toolkit is installed.
struct ProfilerHostApi {
  decltype(&::cuptiGetResultString) get_result_string = nullptr;
  decltype(&::cuptiProfilerHostGetSupportedChips) get_supported_chips = nullptr;
  decltype(&::cuptiProfilerHostInitialize) initialize = nullptr;
  decltype(&::cuptiProfilerHostDeinitialize) deinitialize = nullptr;
  decltype(&::cuptiProfilerHostConfigAddMetrics) config_add_metrics = nullptr;
  decltype(&::cuptiProfilerHostGetConfigImageSize) get_config_image_size = nullptr;
  decltype(&::cuptiProfilerHostGetConfigImage) get_config_image = nullptr;
  decltype(&::cuptiProfilerHostGetNumOfPasses) get_num_of_passes = nullptr;
  decltype(&::cuptiProfilerHostEvaluateToGpuValues) evaluate_to_gpu_values = nullptr;
  decltype(&::cuptiProfilerHostGetMetricProperties) get_metric_properties = nullptr;
  decltype(&::cuptiProfilerHostGetRangeName) get_range_name = nullptr;
  decltype(&::cuptiProfilerHostGetMaxNumHardwareMetricsPerPass) get_max_metrics_per_pass = nullptr;

  // Every entry is set.
  bool Complete() const;
  // "CUPTI_ERROR_INVALID_PARAMETER" style text for `result`, or "CUPTI error <n>".
  std::string ResultText(CUptiResult result) const;
};

// Fills `out` from an open libcupti. False with `error` naming every missing entry (a libcupti
// older than the Host API, CUDA 12.6).
bool ResolveProfilerHostApi(void* handle, ProfilerHostApi* out, std::string* error);

// OpenCuptiLibrary(explicit_path) then ResolveProfilerHostApi: the one call the client needs.
bool LoadProfilerHostApi(const std::string& explicit_path, ProfilerHostApi* out,
                         std::string* error);
// The same, also saying which libcupti answered (for messages and `flopscope counters`).
bool LoadProfilerHostApi(const std::string& explicit_path, ProfilerHostApi* out,
                         CuptiLibrary* library, std::string* error);

}  // namespace flopscope::counters
