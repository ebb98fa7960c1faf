#include "injector/cupti/counter_windows/context_profiler.h"

#include <new>

namespace flopscope::injector::cupti {
namespace {

constexpr const char* kTimingGoesOn = ": no FLOPs counted, timing continues";

}  // namespace

std::string DescribeCounterFailure(const CuptiFailure& failure) {
  switch (failure.result) {
    case CUPTI_ERROR_HARDWARE_BUSY:
      return std::string(
                 "GPU performance counters are busy (DCGM profiling or another profiler "
                 "holds them)") +
             kTimingGoesOn;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return std::string(
                 "GPU profiling is restricted to administrators "
                 "(NVreg_RestrictProfilingToAdminUsers=1)") +
             kTimingGoesOn;
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
      return "counter collection is not supported on this device (" + failure.call + ": " +
             failure.text + ")" + kTimingGoesOn;
    default:
      return failure.call + " failed (" + failure.text + ")" + kTimingGoesOn;
  }
}

bool ContextProfiler::Call(const char* name, CUptiResult result, CuptiFailure* failure) const {
  if (result == CUPTI_SUCCESS) return true;
  *failure = CuptiFailure{name, result, api_->ResultText(result)};
  return false;
}

bool ContextProfiler::CounterAvailability(const RangeProfilerApi& api, CUcontext context,
                                          std::vector<uint8_t>* out,
                                          CuptiFailure* failure) noexcept {
  CUpti_Profiler_GetCounterAvailability_Params params{};
  params.structSize = CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE;
  params.ctx = context;
  CUptiResult result = api.get_counter_availability(&params);
  if (result == CUPTI_SUCCESS) {
    try {
      out->assign(params.counterAvailabilityImageSize, 0);
    } catch (const std::bad_alloc&) {
      result = CUPTI_ERROR_OUT_OF_MEMORY;
    }
  }
  if (result == CUPTI_SUCCESS) {
    params.pCounterAvailabilityImage = out->data();
    result = api.get_counter_availability(&params);
  }
  if (result == CUPTI_SUCCESS) return true;
  *failure = CuptiFailure{"cuptiProfilerGetCounterAvailability", result, api.ResultText(result)};
  return false;
}

bool ContextProfiler::InitializeImage(CuptiFailure* failure) {
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params params{};
  params.structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE;
  params.pRangeProfilerObject = object_;
  params.counterDataSize = image_.size();
  params.pCounterData = image_.data();
  return Call("cuptiRangeProfilerCounterDataImageInitialize",
              api_->counter_data_image_initialize(&params), failure);
}

bool ContextProfiler::Begin(const CounterPlan& plan, uint32_t max_ranges,
                            CuptiFailure* failure) noexcept {
  CUpti_RangeProfiler_Enable_Params enable{};
  enable.structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE;
  enable.ctx = context_;
  if (!Call("cuptiRangeProfilerEnable", api_->enable(&enable), failure)) return false;
  object_ = enable.pRangeProfilerObject;

  std::vector<const char*> names;
  CUpti_RangeProfiler_GetCounterDataSize_Params size{};
  size.structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE;
  size.pRangeProfilerObject = object_;
  size.maxNumOfRanges = max_ranges;
  size.maxNumRangeTreeNodes = max_ranges;  // auto range: one level, one node per range
  bool ok = true;
  try {
    for (const std::string& metric : plan.metrics) names.push_back(metric.c_str());
    size.pMetricNames = names.data();
    size.numMetrics = names.size();
    ok = Call("cuptiRangeProfilerGetCounterDataSize", api_->get_counter_data_size(&size), failure);
    if (ok) image_.assign(size.counterDataSize, 0);
  } catch (const std::bad_alloc&) {
    *failure = CuptiFailure{"allocating the counter data image", CUPTI_ERROR_OUT_OF_MEMORY,
                            api_->ResultText(CUPTI_ERROR_OUT_OF_MEMORY)};
    ok = false;
  }
  ok = ok && InitializeImage(failure);
  if (ok) {
    CUpti_RangeProfiler_SetConfig_Params config{};
    config.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE;
    config.pRangeProfilerObject = object_;
    config.configSize = plan.config_image.size();
    config.pConfig = plan.config_image.data();
    config.counterDataImageSize = image_.size();
    config.pCounterDataImage = image_.data();
    config.range = CUPTI_AutoRange;
    config.replayMode = CUPTI_KernelReplay;
    config.maxRangesPerPass = max_ranges;
    config.numNestingLevels = 1;
    config.minNestingLevel = 1;
    config.passIndex = 0;
    config.targetNestingLevel = 1;
    ok = Call("cuptiRangeProfilerSetConfig", api_->set_config(&config), failure);
  }
  CUpti_RangeProfiler_Start_Params start{};
  start.structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE;
  start.pRangeProfilerObject = object_;
  ok = ok && Call("cuptiRangeProfilerStart", api_->start(&start), failure);
  if (!ok) {
    Disable();
    return false;
  }
  started_ = true;
  return true;
}

bool ContextProfiler::EndPass(DecodedImage* out, CuptiFailure* failure) noexcept {
  if (!started_) return false;
  started_ = false;
  CUpti_RangeProfiler_Stop_Params stop{};
  stop.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
  stop.pRangeProfilerObject = object_;
  if (!Call("cuptiRangeProfilerStop", api_->stop(&stop), failure)) return false;
  CUpti_RangeProfiler_DecodeData_Params decode{};
  decode.structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE;
  decode.pRangeProfilerObject = object_;
  if (!Call("cuptiRangeProfilerDecodeData", api_->decode_data(&decode), failure)) return false;
  try {
    out->image = image_;
  } catch (const std::bad_alloc&) {
    *failure = CuptiFailure{"copying the counter data image", CUPTI_ERROR_OUT_OF_MEMORY,
                            api_->ResultText(CUPTI_ERROR_OUT_OF_MEMORY)};
    return false;
  }
  out->dropped = decode.numOfRangeDropped;
  return true;
}

bool ContextProfiler::Resume(CuptiFailure* failure) noexcept {
  if (object_ == nullptr || started_) return started_;
  // GPU-TODO: the samples re-initialise the image and Start again without a new SetConfig;
  // confirm that the restarted pass writes into the re-initialised image from range 0.
  if (!InitializeImage(failure)) return false;
  CUpti_RangeProfiler_Start_Params start{};
  start.structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE;
  start.pRangeProfilerObject = object_;
  if (!Call("cuptiRangeProfilerStart", api_->start(&start), failure)) return false;
  started_ = true;
  return true;
}

void ContextProfiler::Disable() noexcept {
  if (object_ == nullptr) return;
  if (started_) {
    CUpti_RangeProfiler_Stop_Params stop{};
    stop.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
    stop.pRangeProfilerObject = object_;
    api_->stop(&stop);
    started_ = false;
  }
  CUpti_RangeProfiler_Disable_Params disable{};
  disable.structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE;
  disable.pRangeProfilerObject = object_;
  api_->disable(&disable);
  object_ = nullptr;
}

}  // namespace flopscope::injector::cupti
