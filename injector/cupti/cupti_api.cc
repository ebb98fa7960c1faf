#include "injector/cupti/cupti_api.h"

#include <dlfcn.h>

#include "counters/cupti_library.h"
#include "counters/cupti_symbols.h"

namespace flopscope::injector::cupti {
namespace {

static_assert(kMinimumCuptiVersion == counters::kMinimumCuptiVersion,
              "the tracer and the library that opens libcupti must agree on its oldest version");

// `required` entries missing are named in `*missing`; optional ones are simply left null.
template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* slot, bool required, std::string* missing) {
  return counters::ResolveCuptiSymbol(handle, name, slot, required ? missing : nullptr) ||
         !required;
}

bool ResolveAll(void* handle, CuptiApi* api, std::string* missing) {
  bool ok = true;
  ok &= Resolve(handle, "cuptiGetVersion", &api->get_version, true, missing);
  ok &= Resolve(handle, "cuptiGetResultString", &api->get_result_string, true, missing);
  ok &= Resolve(handle, "cuptiSubscribe_v2", &api->subscribe_v2, false, missing);
  ok &= Resolve(handle, "cuptiSubscribe", &api->subscribe, true, missing);
  ok &= Resolve(handle, "cuptiUnsubscribe", &api->unsubscribe, true, missing);
  ok &= Resolve(handle, "cuptiEnableCallback", &api->enable_callback, true, missing);
  ok &= Resolve(handle, "cuptiGetCallbackName", &api->get_callback_name, true, missing);
  ok &= Resolve(handle, "cuptiActivityRegisterCallbacks", &api->activity_register_callbacks, true,
                missing);
  ok &= Resolve(handle, "cuptiActivityRegisterTimestampCallback",
                &api->activity_register_timestamp_callback, false, missing);
  ok &= Resolve(handle, "cuptiActivityEnable", &api->activity_enable, true, missing);
  ok &= Resolve(handle, "cuptiActivityDisable", &api->activity_disable, true, missing);
  ok &= Resolve(handle, "cuptiActivityFlushAll", &api->activity_flush_all, true, missing);
  ok &=
      Resolve(handle, "cuptiActivityGetNextRecord", &api->activity_get_next_record, true, missing);
  ok &= Resolve(handle, "cuptiActivityGetNumDroppedRecords", &api->activity_get_num_dropped_records,
                true, missing);
  ok &= Resolve(handle, "cuptiFinalize", &api->finalize, true, missing);
  ok &= Resolve(handle, "cuptiGetDeviceId", &api->get_device_id, true, missing);
  ok &= Resolve(handle, "cuptiGetGraphNodeId", &api->get_graph_node_id, true, missing);
  ok &= Resolve(handle, "cuptiDeviceGetChipName", &api->device_get_chip_name, true, missing);
  return ok;
}

}  // namespace

bool CuptiApi::Complete() const {
  return get_version && get_result_string && subscribe && unsubscribe && enable_callback &&
         get_callback_name && activity_register_callbacks && activity_enable && activity_disable &&
         activity_flush_all && activity_get_next_record && activity_get_num_dropped_records &&
         finalize && get_device_id && get_graph_node_id && device_get_chip_name;
}

std::string CuptiApi::ResultText(CUptiResult result) const {
  return counters::CuptiResultText(get_result_string, result);
}

bool LoadCupti(const std::string& explicit_path, LoadedCupti* out, std::string* error) {
  // Finding and opening libcupti (search order, version check) is shared with the counter
  // library, which needs the same copy for the Profiler Host API.
  counters::CuptiLibrary library;
  if (!counters::OpenCuptiLibrary(explicit_path, &library, error)) return false;
  LoadedCupti loaded;
  loaded.path = library.path;
  loaded.version = library.version;
  loaded.handle = library.handle;
  std::string missing;
  if (!ResolveAll(library.handle, &loaded.api, &missing)) {
    *error = library.path + " lacks " + missing;
    return false;
  }
  *out = loaded;
  return true;
}

}  // namespace flopscope::injector::cupti
