#include "injector/cupti/counter_windows/testing/fake_range_profiler.h"

#include <cstring>
#include <utility>

namespace flopscope::injector::cupti::testing {
namespace {

FakeRangeProfiler* g_fake = nullptr;

constexpr size_t kHeader = sizeof(uint64_t);

FakeRangeProfiler::Object* ObjectOf(CUpti_RangeProfiler_Object* object) {
  return reinterpret_cast<FakeRangeProfiler::Object*>(object);
}

void Log(const char* call, const FakeRangeProfiler::Object* object) {
  g_fake->calls.push_back(std::string(call) + " " + std::to_string(object->number));
}

uint64_t ReadWord(const uint8_t* image, size_t index) {
  uint64_t word = 0;
  std::memcpy(&word, image + kHeader * index, sizeof word);
  return word;
}

void WriteWord(uint8_t* image, size_t index, uint64_t word) {
  std::memcpy(image + kHeader * index, &word, sizeof word);
}

CUptiResult Initialize(CUpti_Profiler_Initialize_Params*) {
  ++g_fake->initializations;
  return g_fake->initialize_result;
}

CUptiResult Deinitialize(CUpti_Profiler_DeInitialize_Params*) { return CUPTI_SUCCESS; }

CUptiResult Availability(CUpti_Profiler_GetCounterAvailability_Params* params) {
  if (g_fake->availability_result != CUPTI_SUCCESS) return g_fake->availability_result;
  if (params->pCounterAvailabilityImage == nullptr) {
    params->counterAvailabilityImageSize = 16;
  } else {
    std::memset(params->pCounterAvailabilityImage, 0xab, params->counterAvailabilityImageSize);
  }
  return CUPTI_SUCCESS;
}

CUptiResult Enable(CUpti_RangeProfiler_Enable_Params* params) {
  if (g_fake->enable_result != CUPTI_SUCCESS) return g_fake->enable_result;
  auto [number, added] =
      g_fake->numbers.emplace(params->ctx, static_cast<int>(g_fake->numbers.size()) + 1);
  FakeRangeProfiler::Object& object = g_fake->objects[params->ctx];
  object = FakeRangeProfiler::Object{};
  object.context = params->ctx;
  object.number = number->second;
  params->pRangeProfilerObject = reinterpret_cast<CUpti_RangeProfiler_Object*>(&object);
  Log("enable", &object);
  return CUPTI_SUCCESS;
}

CUptiResult Disable(CUpti_RangeProfiler_Disable_Params* params) {
  FakeRangeProfiler::Object* object = ObjectOf(params->pRangeProfilerObject);
  Log("disable", object);
  if (g_fake->disable_result != CUPTI_SUCCESS) return g_fake->disable_result;
  g_fake->objects.erase(object->context);
  return CUPTI_SUCCESS;
}

CUptiResult DataSize(CUpti_RangeProfiler_GetCounterDataSize_Params* params) {
  g_fake->max_ranges = static_cast<uint32_t>(params->maxNumOfRanges);
  params->counterDataSize = kHeader * (1 + params->maxNumOfRanges);
  return CUPTI_SUCCESS;
}

CUptiResult InitializeImage(CUpti_RangeProfiler_CounterDataImage_Initialize_Params* params) {
  FakeRangeProfiler::Object* object = ObjectOf(params->pRangeProfilerObject);
  Log("initialize_image", object);
  std::memset(params->pCounterData, 0, params->counterDataSize);
  return CUPTI_SUCCESS;
}

CUptiResult SetConfig(CUpti_RangeProfiler_SetConfig_Params* params) {
  FakeRangeProfiler::Object* object = ObjectOf(params->pRangeProfilerObject);
  Log("set_config", object);
  g_fake->max_ranges_per_pass = static_cast<uint32_t>(params->maxRangesPerPass);
  if (g_fake->refuse_ranges_above != 0 && params->maxRangesPerPass > g_fake->refuse_ranges_above) {
    return CUPTI_ERROR_INVALID_OPERATION;
  }
  object->image = params->pCounterDataImage;
  object->image_size = params->counterDataImageSize;
  g_fake->auto_range_kernel_replay &=
      params->range == CUPTI_AutoRange && params->replayMode == CUPTI_KernelReplay;
  return CUPTI_SUCCESS;
}

CUptiResult Start(CUpti_RangeProfiler_Start_Params* params) {
  FakeRangeProfiler::Object* object = ObjectOf(params->pRangeProfilerObject);
  Log("start", object);
  if (g_fake->during_start) std::exchange(g_fake->during_start, nullptr)();
  if (g_fake->start_result != CUPTI_SUCCESS) return g_fake->start_result;
  object->started = true;
  object->captured.clear();
  return CUPTI_SUCCESS;
}

CUptiResult Stop(CUpti_RangeProfiler_Stop_Params* params) {
  FakeRangeProfiler::Object* object = ObjectOf(params->pRangeProfilerObject);
  Log("stop", object);
  if (g_fake->stop_result != CUPTI_SUCCESS) return g_fake->stop_result;
  object->started = false;
  params->isAllPassSubmitted = g_fake->all_pass_submitted ? 1 : 0;
  return CUPTI_SUCCESS;
}

CUptiResult Decode(CUpti_RangeProfiler_DecodeData_Params* params) {
  FakeRangeProfiler::Object* object = ObjectOf(params->pRangeProfilerObject);
  Log("decode", object);
  if (g_fake->decode_result != CUPTI_SUCCESS) return g_fake->decode_result;
  const size_t capacity = object->image_size / kHeader - 1;
  const size_t kept = std::min(capacity, object->captured.size());
  WriteWord(object->image, 0, kept);
  for (size_t i = 0; i < kept; ++i) WriteWord(object->image, 1 + i, object->captured[i]);
  params->numOfRangeDropped = object->captured.size() - kept;
  if (!g_fake->extra_dropped.empty()) {
    params->numOfRangeDropped += g_fake->extra_dropped.front();
    g_fake->extra_dropped.pop_front();
  }
  return CUPTI_SUCCESS;
}

CUptiResult DataInfo(CUpti_RangeProfiler_GetCounterDataInfo_Params* params) {
  if (params->pCounterDataImage == nullptr || params->counterDataImageSize < kHeader) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  params->numTotalRanges = ReadWord(params->pCounterDataImage, 0);
  return CUPTI_SUCCESS;
}

CUptiResult RangeInfo(CUpti_RangeProfiler_CounterData_GetRangeInfo_Params* params) {
  // Names restart at 0 in every image; one may be skipped to play a lost range.
  uint64_t name = params->rangeIndex;
  if (g_fake->skip_a_name && params->rangeIndex > 0) ++name;
  g_fake->names.push_back(std::to_string(name));
  params->rangeName = g_fake->names.back().c_str();
  return CUPTI_SUCCESS;
}

int NumberOf(CUcontext context) {
  auto it = g_fake->numbers.find(context);
  return it == g_fake->numbers.end() ? 0 : it->second;
}

CUresult PushCurrent(CUcontext context) {
  g_fake->calls.push_back("push " + std::to_string(NumberOf(context)));
  g_fake->current.push_back(context);
  return CUDA_SUCCESS;
}

CUresult PopCurrent(CUcontext* context) {
  if (g_fake->current.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  g_fake->calls.push_back("pop " + std::to_string(NumberOf(g_fake->current.back())));
  if (context != nullptr) *context = g_fake->current.back();
  g_fake->current.pop_back();
  return CUDA_SUCCESS;
}

}  // namespace

FakeRangeProfiler::FakeRangeProfiler() { g_fake = this; }
FakeRangeProfiler::~FakeRangeProfiler() { g_fake = nullptr; }

void FakeRangeProfiler::KernelRuns(CUcontext context, uint64_t tag) {
  auto it = objects.find(context);
  if (it != objects.end() && it->second.started) it->second.captured.push_back(tag);
}

bool FakeRangeProfiler::started(CUcontext context) const {
  auto it = objects.find(context);
  return it != objects.end() && it->second.started;
}

RangeProfilerApi FakeRangeProfiler::Api() const {
  RangeProfilerApi api;
  api.get_result_string = &::cuptiGetResultString;  // real: a pure lookup
  api.profiler_initialize = &Initialize;
  api.profiler_deinitialize = &Deinitialize;
  api.get_counter_availability = &Availability;
  api.enable = &Enable;
  api.disable = &Disable;
  api.get_counter_data_size = &DataSize;
  api.counter_data_image_initialize = &InitializeImage;
  api.set_config = &SetConfig;
  api.start = &Start;
  api.stop = &Stop;
  api.decode_data = &Decode;
  api.get_counter_data_info = &DataInfo;
  api.get_range_info = &RangeInfo;
  api.ctx_push_current = &PushCurrent;
  api.ctx_pop_current = &PopCurrent;
  return api;
}

}  // namespace flopscope::injector::cupti::testing
