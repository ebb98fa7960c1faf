#pragma once

#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>

#include <string>

namespace flopscope::injector::cupti {

// The CUPTI entry points that collect counters on a device (Profiler target API and Range
// Profiler), as function pointers resolved from the libcupti the tracer opened (cupti_api.h says
// why there is no link-time dependency). Tests fill it with a fake that scripts CUPTI's answers
// (testing/fake_range_profiler.h): without a GPU every one of these fails.
struct RangeProfilerApi {
  decltype(&::cuptiGetResultString) get_result_string = nullptr;
  decltype(&::cuptiProfilerInitialize) profiler_initialize = nullptr;
  decltype(&::cuptiProfilerDeInitialize) profiler_deinitialize = nullptr;
  decltype(&::cuptiProfilerGetCounterAvailability) get_counter_availability = nullptr;
  decltype(&::cuptiRangeProfilerEnable) enable = nullptr;
  decltype(&::cuptiRangeProfilerDisable) disable = nullptr;
  decltype(&::cuptiRangeProfilerGetCounterDataSize) get_counter_data_size = nullptr;
  decltype(&::cuptiRangeProfilerCounterDataImageInitialize) counter_data_image_initialize = nullptr;
  decltype(&::cuptiRangeProfilerSetConfig) set_config = nullptr;
  decltype(&::cuptiRangeProfilerStart) start = nullptr;
  decltype(&::cuptiRangeProfilerStop) stop = nullptr;
  decltype(&::cuptiRangeProfilerDecodeData) decode_data = nullptr;
  decltype(&::cuptiRangeProfilerGetCounterDataInfo) get_counter_data_info = nullptr;
  decltype(&::cuptiRangeProfilerCounterDataGetRangeInfo) get_range_info = nullptr;

  bool Complete() const;
  // "CUPTI_ERROR_HARDWARE_BUSY" style text for a result, or "CUPTI error <n>".
  std::string ResultText(CUptiResult result) const;
};

// Fills `out` from an open libcupti (never closed). False with `error` naming every missing
// entry (a libcupti older than the Range Profiler, CUDA 12.6).
bool ResolveRangeProfilerApi(void* handle, RangeProfilerApi* out, std::string* error);

}  // namespace flopscope::injector::cupti
