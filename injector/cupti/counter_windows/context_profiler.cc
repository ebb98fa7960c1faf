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

bool ContextProfiler::SetConfig(CuptiFailure* failure) {
  CUpti_RangeProfiler_SetConfig_Params config{};
  config.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE;
  config.pRangeProfilerObject = object_;
  config.configSize = config_.size();
  config.pConfig = config_.data();
  config.counterDataImageSize = image_.size();
  config.pCounterDataImage = image_.data();
  config.range = CUPTI_AutoRange;
  config.replayMode = CUPTI_KernelReplay;
  config.maxRangesPerPass = max_ranges_;
  config.numNestingLevels = 1;
  config.minNestingLevel = 1;
  config.passIndex = 0;
  config.targetNestingLevel = 1;
  return Call("cuptiRangeProfilerSetConfig", api_->set_config(&config), failure);
}

bool ContextProfiler::Start(CuptiFailure* failure) {
  CUpti_RangeProfiler_Start_Params start{};
  start.structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE;
  start.pRangeProfilerObject = object_;
  if (!Call("cuptiRangeProfilerStart", api_->start(&start), failure)) return false;
  started_ = true;
  return true;
}

bool ContextProfiler::StartWithImage(uint32_t ranges, CuptiFailure* failure) {
  max_ranges_ = ranges;
  std::vector<const char*> names;
  CUpti_RangeProfiler_GetCounterDataSize_Params size{};
  size.structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE;
  size.pRangeProfilerObject = object_;
  size.maxNumOfRanges = ranges;
  size.maxNumRangeTreeNodes = ranges;  // auto range: one level, one node per range
  try {
    for (const std::string& metric : metrics_) names.push_back(metric.c_str());
    size.pMetricNames = names.data();
    size.numMetrics = names.size();
    if (!Call("cuptiRangeProfilerGetCounterDataSize", api_->get_counter_data_size(&size),
              failure)) {
      return false;
    }
    image_.assign(size.counterDataSize, 0);
  } catch (const std::bad_alloc&) {
    *failure = CuptiFailure{"allocating the counter data image", CUPTI_ERROR_OUT_OF_MEMORY,
                            api_->ResultText(CUPTI_ERROR_OUT_OF_MEMORY)};
    return false;
  }
  return InitializeImage(failure) && SetConfig(failure) && Start(failure);
}

bool ContextProfiler::Begin(const CounterPlan& plan, uint32_t max_ranges,
                            CuptiFailure* failure) noexcept {
  CUpti_RangeProfiler_Enable_Params enable{};
  enable.structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE;
  enable.ctx = context_;
  if (!Call("cuptiRangeProfilerEnable", api_->enable(&enable), failure)) return false;
  object_ = enable.pRangeProfilerObject;
  bool ok = true;
  try {
    metrics_ = plan.metrics;
    config_ = plan.config_image;
  } catch (const std::bad_alloc&) {
    *failure = CuptiFailure{"copying the counter plan", CUPTI_ERROR_OUT_OF_MEMORY,
                            api_->ResultText(CUPTI_ERROR_OUT_OF_MEMORY)};
    ok = false;
  }
  ok = ok && StartWithImage(max_ranges, failure);
  // gpu-review D6: the image's size or maxRangesPerPass may be more than CUPTI accepts (reported
  // around 2000-3000 ranges). One retry at half the size; a second failure is the real cause.
  if (!ok && object_ != nullptr && max_ranges / 2 >= kMinRetryRanges) {
    ok = StartWithImage(max_ranges / 2, failure);
  }
  if (!ok) {
    Disable(nullptr);  // the start's failure is the one to report
    return false;
  }
  return true;
}

bool ContextProfiler::EndPass(DecodedImage* out, CuptiFailure* failure) noexcept {
  if (!started_) return false;
  started_ = false;
  CUpti_RangeProfiler_Stop_Params stop{};
  stop.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
  stop.pRangeProfilerObject = object_;
  if (!Call("cuptiRangeProfilerStop", api_->stop(&stop), failure)) return false;
  // gpu-review D13: in kernel replay CUPTI replays every pass itself, so this is 1 after Stop
  // (cupti_range_profiler.h, CUpti_RangeProfiler_Stop_Params). 0 would mean partial data.
  if (stop.isAllPassSubmitted == 0) {
    *failure = CuptiFailure{"cuptiRangeProfilerStop", CUPTI_ERROR_UNKNOWN,
                            "not every kernel-replay pass was submitted"};
    return false;
  }
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
  // gpu-review D12: NVIDIA's user-replay loop Starts again after Stop without SetConfig, but
  // never after DecodeData and a re-initialised image. SetConfig hands CUPTI the re-initialised
  // image again, as Begin does; it is cheap.
  return InitializeImage(failure) && SetConfig(failure) && Start(failure);
}

bool ContextProfiler::Disable(CuptiFailure* failure) noexcept {
  if (object_ == nullptr) return true;
  CuptiFailure first;
  bool ok = true;
  if (started_) {
    CUpti_RangeProfiler_Stop_Params stop{};
    stop.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
    stop.pRangeProfilerObject = object_;
    ok = Call("cuptiRangeProfilerStop", api_->stop(&stop), &first);
    started_ = false;
  }
  CUpti_RangeProfiler_Disable_Params disable{};
  disable.structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE;
  disable.pRangeProfilerObject = object_;
  // Disabled even after a failed Stop: the object must not outlive this call either way.
  CuptiFailure disabling;
  if (!Call("cuptiRangeProfilerDisable", api_->disable(&disable), &disabling) && ok) {
    first = disabling;
    ok = false;
  }
  object_ = nullptr;
  if (!ok && failure != nullptr) *failure = first;
  return ok;
}

}  // namespace flopscope::injector::cupti
