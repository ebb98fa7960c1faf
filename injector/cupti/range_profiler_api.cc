#include "injector/cupti/range_profiler_api.h"

#include <dlfcn.h>

namespace flopscope::injector::cupti {
namespace {

template <typename Fn>
void Resolve(void* handle, const char* name, Fn* slot, std::string* missing) {
  *slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*slot != nullptr) return;
  if (!missing->empty()) *missing += ", ";
  *missing += name;
}

}  // namespace

bool RangeProfilerApi::Complete() const {
  return get_result_string && profiler_initialize && profiler_deinitialize &&
         get_counter_availability && enable && disable && get_counter_data_size &&
         counter_data_image_initialize && set_config && start && stop && decode_data &&
         get_counter_data_info && get_range_info;
}

std::string RangeProfilerApi::ResultText(CUptiResult result) const {
  const char* text = nullptr;
  if (get_result_string != nullptr && get_result_string(result, &text) == CUPTI_SUCCESS &&
      text != nullptr) {
    return text;
  }
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

bool ResolveRangeProfilerApi(void* handle, RangeProfilerApi* out, std::string* error) {
  if (handle == nullptr) {
    *error = "libcupti is not open";
    return false;
  }
  RangeProfilerApi api;
  std::string missing;
  Resolve(handle, "cuptiGetResultString", &api.get_result_string, &missing);
  Resolve(handle, "cuptiProfilerInitialize", &api.profiler_initialize, &missing);
  Resolve(handle, "cuptiProfilerDeInitialize", &api.profiler_deinitialize, &missing);
  Resolve(handle, "cuptiProfilerGetCounterAvailability", &api.get_counter_availability, &missing);
  Resolve(handle, "cuptiRangeProfilerEnable", &api.enable, &missing);
  Resolve(handle, "cuptiRangeProfilerDisable", &api.disable, &missing);
  Resolve(handle, "cuptiRangeProfilerGetCounterDataSize", &api.get_counter_data_size, &missing);
  Resolve(handle, "cuptiRangeProfilerCounterDataImageInitialize",
          &api.counter_data_image_initialize, &missing);
  Resolve(handle, "cuptiRangeProfilerSetConfig", &api.set_config, &missing);
  Resolve(handle, "cuptiRangeProfilerStart", &api.start, &missing);
  Resolve(handle, "cuptiRangeProfilerStop", &api.stop, &missing);
  Resolve(handle, "cuptiRangeProfilerDecodeData", &api.decode_data, &missing);
  Resolve(handle, "cuptiRangeProfilerGetCounterDataInfo", &api.get_counter_data_info, &missing);
  Resolve(handle, "cuptiRangeProfilerCounterDataGetRangeInfo", &api.get_range_info, &missing);
  if (!missing.empty()) {
    *error = "libcupti lacks the range profiler (" + missing + "): no counter windows";
    return false;
  }
  *out = api;
  return true;
}

}  // namespace flopscope::injector::cupti
