#include "injector/cupti/testing/fake_cupti.h"

#include <cstring>

namespace flopscope::injector::cupti::testing {
namespace {

FakeCupti* g_fake = nullptr;

CUptiResult GetVersion(uint32_t* version) {
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

CUptiResult SubscribeV2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                        void* userdata, CUpti_SubscriberParams* params) {
  if (g_fake->subscribe_result != CUPTI_SUCCESS) {
    if (params != nullptr && params->oldSubscriberName != nullptr) {
      std::strncpy(params->oldSubscriberName, g_fake->holder.c_str(),
                   params->oldSubscriberSize - 1);
    }
    return g_fake->subscribe_result;
  }
  g_fake->subscribed = true;
  g_fake->callback = callback;
  g_fake->userdata = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(g_fake);
  return CUPTI_SUCCESS;
}

CUptiResult Subscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                      void* userdata) {
  return SubscribeV2(subscriber, callback, userdata, nullptr);
}

CUptiResult Unsubscribe(CUpti_SubscriberHandle) {
  g_fake->unsubscribed = true;
  return CUPTI_SUCCESS;
}

CUptiResult EnableCallback(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain,
                           CUpti_CallbackId cbid) {
  if (enable != 0) g_fake->enabled_callbacks.insert({static_cast<int>(domain), cbid});
  return CUPTI_SUCCESS;
}

CUptiResult GetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  auto it = g_fake->callback_names.find({static_cast<int>(domain), cbid});
  if (it == g_fake->callback_names.end()) return CUPTI_ERROR_INVALID_PARAMETER;
  *name = it->second.c_str();
  return CUPTI_SUCCESS;
}

CUptiResult RegisterCallbacks(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) {
  return CUPTI_SUCCESS;
}

CUptiResult RegisterTimestamp(CUpti_TimestampCallbackFunc) {
  g_fake->timestamp_callback_registered = true;
  return CUPTI_SUCCESS;
}

CUptiResult ActivityEnable(CUpti_ActivityKind kind) {
  if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
      g_fake->activity_enable_result != CUPTI_SUCCESS) {
    return g_fake->activity_enable_result;
  }
  g_fake->enabled_kinds.insert(static_cast<int>(kind));
  return CUPTI_SUCCESS;
}

CUptiResult ActivityDisable(CUpti_ActivityKind kind) {
  g_fake->enabled_kinds.erase(static_cast<int>(kind));
  return CUPTI_SUCCESS;
}

CUptiResult FlushAll(uint32_t flag) {
  g_fake->flushes.push_back(flag);
  if (g_fake->on_flush) g_fake->on_flush(flag);
  return CUPTI_SUCCESS;
}

CUptiResult GetNumDropped(CUcontext, uint32_t, size_t* dropped) {
  *dropped = g_fake->dropped_per_buffer;
  return CUPTI_SUCCESS;
}

CUptiResult Finalize() {
  g_fake->finalized = true;
  return CUPTI_SUCCESS;
}

CUptiResult GetDeviceId(CUcontext context, uint32_t* device) {
  auto it = g_fake->context_devices.find(context);
  if (it == g_fake->context_devices.end()) return CUPTI_ERROR_INVALID_CONTEXT;
  *device = it->second;
  return CUPTI_SUCCESS;
}

CUptiResult GetGraphNodeId(CUgraphNode node, uint64_t* id) {
  auto it = g_fake->graph_node_ids.find(node);
  if (it == g_fake->graph_node_ids.end()) return CUPTI_ERROR_INVALID_PARAMETER;
  *id = it->second;
  return CUPTI_SUCCESS;
}

CUptiResult GetChipName(CUpti_Device_GetChipName_Params* params) {
  auto it = g_fake->chips.find(static_cast<uint32_t>(params->deviceIndex));
  if (it == g_fake->chips.end()) return CUPTI_ERROR_INVALID_DEVICE;
  params->pChipName = it->second.c_str();
  return CUPTI_SUCCESS;
}

}  // namespace

FakeCupti::FakeCupti() { g_fake = this; }
FakeCupti::~FakeCupti() { g_fake = nullptr; }

CuptiApi FakeCupti::Api() const {
  CuptiApi api;
  api.get_version = &GetVersion;
  api.get_result_string = &::cuptiGetResultString;  // real: a pure lookup
  api.subscribe_v2 = &SubscribeV2;
  api.subscribe = &Subscribe;
  api.unsubscribe = &Unsubscribe;
  api.enable_callback = &EnableCallback;
  api.get_callback_name = &GetCallbackName;
  api.activity_register_callbacks = &RegisterCallbacks;
  api.activity_register_timestamp_callback = &RegisterTimestamp;
  api.activity_enable = &ActivityEnable;
  api.activity_disable = &ActivityDisable;
  api.activity_flush_all = &FlushAll;
  api.activity_get_next_record = &::cuptiActivityGetNextRecord;  // real: the parser under test
  api.activity_get_num_dropped_records = &GetNumDropped;
  api.finalize = &Finalize;
  api.get_device_id = &GetDeviceId;
  api.get_graph_node_id = &GetGraphNodeId;
  api.device_get_chip_name = &GetChipName;
  return api;
}

}  // namespace flopscope::injector::cupti::testing
