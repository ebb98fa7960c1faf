#include "counters/host_object.h"

namespace flopscope::counters {

HostObject::~HostObject() { Reset(); }

void HostObject::Reset() {
  if (object_ == nullptr) return;
  CUpti_Profiler_Host_Deinitialize_Params params{};
  params.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
  params.pHostObject = object_;
  api_.deinitialize(&params);  // nothing to do about a failure here but not use the object again
  object_ = nullptr;
}

bool HostObject::Initialize(const ProfilerHostApi& api, std::string_view chip,
                            const uint8_t* availability, size_t availability_size,
                            std::string* error) {
  Reset();
  if (!api.Complete()) {
    *error = "the Profiler Host API table is incomplete (libcupti not loaded)";
    return false;
  }
  if (availability != nullptr && availability_size == 0) {
    *error = "the counter availability image is empty";
    return false;
  }
  api_ = api;
  chip_ = std::string(chip);
  CUpti_Profiler_Host_Initialize_Params params{};
  params.structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE;
  params.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  params.pChipName = chip_.c_str();
  params.pCounterAvailabilityImage = availability;
  const CUptiResult result = api_.initialize(&params);
  if (result != CUPTI_SUCCESS || params.pHostObject == nullptr) {
    *error = "CUPTI's Profiler Host API cannot configure chip '" + chip_ + "' (" +
             api_.ResultText(result) + ")";
    return false;
  }
  object_ = params.pHostObject;
  return true;
}

bool HostObject::AddMetrics(const std::vector<std::string>& metrics, std::string* result_text) {
  if (object_ == nullptr) {
    *result_text = "host object not initialized";
    return false;
  }
  std::vector<const char*> names;
  names.reserve(metrics.size());
  for (const std::string& metric : metrics) names.push_back(metric.c_str());
  CUpti_Profiler_Host_ConfigAddMetrics_Params params{};
  params.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE;
  params.pHostObject = object_;
  params.ppMetricNames = names.data();
  params.numMetrics = names.size();
  const CUptiResult result = api_.config_add_metrics(&params);
  if (result == CUPTI_SUCCESS) return true;
  *result_text = api_.ResultText(result);
  return false;
}

bool HostObject::ConfigImage(std::vector<uint8_t>* image, std::string* error) {
  CUpti_Profiler_Host_GetConfigImageSize_Params size{};
  size.structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE;
  size.pHostObject = object_;
  CUptiResult result = api_.get_config_image_size(&size);
  if (result != CUPTI_SUCCESS || size.configImageSize == 0) {
    *error = "CUPTI could not size the config image for chip '" + chip_ + "' (" +
             api_.ResultText(result) + ")";
    return false;
  }
  image->assign(size.configImageSize, 0);
  CUpti_Profiler_Host_GetConfigImage_Params get{};
  get.structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE;
  get.pHostObject = object_;
  get.configImageSize = image->size();
  get.pConfigImage = image->data();
  result = api_.get_config_image(&get);
  if (result != CUPTI_SUCCESS) {
    image->clear();
    *error = "CUPTI could not build the config image for chip '" + chip_ + "' (" +
             api_.ResultText(result) + ")";
    return false;
  }
  return true;
}

bool HostObject::Describe(const std::string& metric, std::string* description, std::string* error) {
  if (object_ == nullptr) {
    *error = "host object not initialized";
    return false;
  }
  CUpti_Profiler_Host_GetMetricProperties_Params params{};
  params.structSize = CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE;
  params.pHostObject = object_;
  params.pMetricName = metric.c_str();
  const CUptiResult result = api_.get_metric_properties(&params);
  if (result != CUPTI_SUCCESS) {
    *error =
        "chip '" + chip_ + "' does not define " + metric + " (" + api_.ResultText(result) + ")";
    return false;
  }
  *description = params.pDescription != nullptr ? params.pDescription : "";
  return true;
}

}  // namespace flopscope::counters
