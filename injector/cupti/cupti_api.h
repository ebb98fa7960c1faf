#pragma once

#include <cupti.h>
#include <cupti_target.h>

#include <cstdint>
#include <string>

namespace flopscope::injector::cupti {

// The CUPTI entry points the tracer uses, as a table of function pointers.
//
// Why a table and not a link-time dependency: the injector is LD_PRELOADed into every process of
// a job, most of which never touch CUDA (launchers, shells, data loaders). A DT_NEEDED on
// libcupti would map it (and its static constructors) into all of them. The table is filled by
// LoadCupti() only when CUDA initialises, and tests fill it with the real functions of a linked
// libcupti or with fakes that script CUPTI's answers (no GPU needed either way).
struct CuptiApi {
  decltype(&::cuptiGetVersion) get_version = nullptr;
  decltype(&::cuptiGetResultString) get_result_string = nullptr;
  decltype(&::cuptiSubscribe_v2) subscribe_v2 = nullptr;  // null in a libcupti older than 12.6
  decltype(&::cuptiSubscribe) subscribe = nullptr;
  decltype(&::cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&::cuptiEnableCallback) enable_callback = nullptr;
  decltype(&::cuptiGetCallbackName) get_callback_name = nullptr;
  decltype(&::cuptiActivityRegisterCallbacks) activity_register_callbacks = nullptr;
  decltype(&::cuptiActivityRegisterTimestampCallback) activity_register_timestamp_callback =
      nullptr;
  decltype(&::cuptiActivityEnable) activity_enable = nullptr;
  decltype(&::cuptiActivityDisable) activity_disable = nullptr;
  decltype(&::cuptiActivityFlushAll) activity_flush_all = nullptr;
  decltype(&::cuptiActivityGetNextRecord) activity_get_next_record = nullptr;
  decltype(&::cuptiActivityGetNumDroppedRecords) activity_get_num_dropped_records = nullptr;
  decltype(&::cuptiFinalize) finalize = nullptr;
  decltype(&::cuptiGetDeviceId) get_device_id = nullptr;
  decltype(&::cuptiGetGraphNodeId) get_graph_node_id = nullptr;
  decltype(&::cuptiDeviceGetChipName) device_get_chip_name = nullptr;

  // Every entry the tracer cannot do without is set (subscribe_v2 and the timestamp callback
  // are optional).
  bool Complete() const;
  // "CUPTI_ERROR_UNKNOWN" style text for a result, or "CUPTI error <n>".
  std::string ResultText(CUptiResult result) const;
};

// The CUPTI record layouts this build parses (CUpti_ActivityKernel10, ...) are those of
// CUPTI_API_VERSION; an older libcupti writes older, shorter layouts.
inline constexpr uint32_t kMinimumCuptiVersion = 130000;

struct LoadedCupti {
  CuptiApi api;
  std::string path;  // what was opened
  uint32_t version = 0;
  void* handle = nullptr;  // the dlopen handle (never closed): the counter windows resolve
                           // the range profiler and the Host API from it
};

// Opens libcupti (never closed: CUPTI keeps threads and callbacks into it) and resolves the
// table. Search order: `explicit_path` (FLOPSCOPE_CUPTI_PATH) alone when given; else the one
// already loaded in the process or found by the dynamic linker ("libcupti.so.13"), then the
// toolkit's copy this build was configured with. False with `error` set (one sentence naming
// what was tried) when none loads, a symbol is missing or the version is too old.
bool LoadCupti(const std::string& explicit_path, LoadedCupti* out, std::string* error);

}  // namespace flopscope::injector::cupti
