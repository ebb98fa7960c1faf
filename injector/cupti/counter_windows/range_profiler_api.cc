#include "injector/cupti/counter_windows/range_profiler_api.h"

#include <dlfcn.h>

#include "counters/cupti_symbols.h"

namespace flopscope::injector::cupti {
bool RangeProfilerApi::Complete() const {
  return get_result_string && profiler_initialize && profiler_deinitialize &&
         get_counter_availability && enable && disable && get_counter_data_size &&
         counter_data_image_initialize && set_config && start && stop && decode_data &&
         get_counter_data_info && get_range_info;
}

std::string RangeProfilerApi::ResultText(CUptiResult result) const {
  return counters::CuptiResultText(get_result_string, result);
}

bool ResolveRangeProfilerApi(void* handle, RangeProfilerApi* out, std::string* error) {
  if (handle == nullptr) {
    *error = "libcupti is not open";
    return false;
  }
  RangeProfilerApi api;
  std::string missing;
  counters::ResolveCuptiSymbol(handle, "cuptiGetResultString", &api.get_result_string, &missing);
  counters::ResolveCuptiSymbol(handle, "cuptiProfilerInitialize", &api.profiler_initialize,
                               &missing);
  counters::ResolveCuptiSymbol(handle, "cuptiProfilerDeInitialize", &api.profiler_deinitialize,
                               &missing);
  counters::ResolveCuptiSymbol(handle, "cuptiProfilerGetCounterAvailability",
                               &api.get_counter_availability, &missing);
  counters::ResolveCuptiSymbol(handle, "cuptiRangeProfilerEnable", &api.enable, &missing);
  counters::ResolveCuptiSymbol(handle, "cuptiRangeProfilerDisable", &api.disable, &missing);
  counters::ResolveCuptiSymbol(handle, "cuptiRangeProfilerGetCounterDataSize",
                               &api.get_counter_data_size, &missing);
  counters::ResolveCuptiSymbol(handle, "cuptiRangeProfilerCounterDataImageInitialize",
                               &api.counter_data_image_initialize, &missing);
  counters::ResolveCuptiSymbol(handle, "cuptiRangeProfilerSetConfig", &api.set_config, &missing);
  counters::ResolveCuptiSymbol(handle, "cuptiRangeProfilerStart", &api.start, &missing);
  counters::ResolveCuptiSymbol(handle, "cuptiRangeProfilerStop", &api.stop, &missing);
  counters::ResolveCuptiSymbol(handle, "cuptiRangeProfilerDecodeData", &api.decode_data, &missing);
  counters::ResolveCuptiSymbol(handle, "cuptiRangeProfilerGetCounterDataInfo",
                               &api.get_counter_data_info, &missing);
  counters::ResolveCuptiSymbol(handle, "cuptiRangeProfilerCounterDataGetRangeInfo",
                               &api.get_range_info, &missing);
  if (!missing.empty()) {
    *error = "libcupti lacks the range profiler (" + missing + "): no counter windows";
    return false;
  }
  // RTLD_NOLOAD: only the libcuda CUDA itself loaded (CUPTI runs inside cuInit, so it is there).
  if (void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
    counters::ResolveCuptiSymbol(cuda, "cuCtxPushCurrent_v2", &api.ctx_push_current, nullptr);
    counters::ResolveCuptiSymbol(cuda, "cuCtxPopCurrent_v2", &api.ctx_pop_current, nullptr);
  }
  *out = api;
  return true;
}

}  // namespace flopscope::injector::cupti
