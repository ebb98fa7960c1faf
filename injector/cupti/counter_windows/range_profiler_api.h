#pragma once

#include <cuda.h>
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
  // From the libcuda already loaded (optional: null when it cannot be found). Make a context
  // current on a thread where it is not, around Stop/Decode/Disable (gpu-review D11). These
  // driver calls raise no callback of ours: the tracer enables launch callbacks only.
  decltype(&::cuCtxPushCurrent) ctx_push_current = nullptr;
  decltype(&::cuCtxPopCurrent) ctx_pop_current = nullptr;

  bool Complete() const;
  // "CUPTI_ERROR_HARDWARE_BUSY" style text for a result, or "CUPTI error <n>".
  std::string ResultText(CUptiResult result) const;
};

// Fills `out` from an open libcupti (never closed), and the context calls from the libcuda the
// process has loaded (never loaded here). False with `error` naming every missing CUPTI entry (a
// libcupti older than the Range Profiler, CUDA 12.6).
bool ResolveRangeProfilerApi(void* handle, RangeProfilerApi* out, std::string* error);

}  // namespace flopscope::injector::cupti
