#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "counters/profiler_host_api.h"

namespace flopscope::counters {

// One CUPTI Profiler Host object (a range-profiler configuration for one chip), deinitialized
// when this goes away.
//
// CUPTI hazard: a host object is poisoned by the first name it rejects; every later
// ConfigAddMetrics on it fails with CUPTI_ERROR_UNKNOWN (cupti.md §2). So an object that saw a
// failed AddMetrics is good for nothing but destruction, and names are validated on throw-away
// objects before the real one is built. Not thread-safe: one thread at a time per object.
class HostObject {
 public:
  HostObject() = default;
  ~HostObject();
  HostObject(const HostObject&) = delete;
  HostObject& operator=(const HostObject&) = delete;

  // `availability` (the device's counter availability image) may be null: planning from the
  // chip name alone. CUPTI copies what it needs during the call.
  // CUPTI hazard: it does not validate the image (arbitrary bytes crash it, probed on 13.0), so
  // pass only what cuptiProfilerGetCounterAvailability returned.
  bool Initialize(const ProfilerHostApi& api, std::string_view chip, const uint8_t* availability,
                  size_t availability_size, std::string* error);
  // False with `result_text` set to CUPTI's result text when any name is rejected.
  bool AddMetrics(const std::vector<std::string>& metrics, std::string* result_text);
  bool ConfigImage(std::vector<uint8_t>* image, std::string* error);
  // CUPTI's one-line description of `metric` on this chip (cuptiProfilerHostGetMetricProperties;
  // it does not poison the object). False with `error` set for a name the chip does not define.
  bool Describe(const std::string& metric, std::string* description, std::string* error);
  void Reset();

  CUpti_Profiler_Host_Object* get() const { return object_; }
  const ProfilerHostApi& api() const { return api_; }

 private:
  ProfilerHostApi api_;
  CUpti_Profiler_Host_Object* object_ = nullptr;
  std::string chip_;  // pChipName is read during Initialize; kept for messages
};

}  // namespace flopscope::counters
