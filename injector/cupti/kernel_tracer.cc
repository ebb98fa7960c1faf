#include "injector/cupti/kernel_tracer.h"

#include <pthread.h>

#include <cstdlib>
#include <ctime>
#include <string>

#include "injector/cupti/activity_parser.h"
#include "injector/cupti/callback_roles.h"

namespace flopscope::injector::cupti {
namespace {

constexpr CUpti_ActivityKind kOptionalKinds[] = {
    CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_DEVICE};

constexpr CUpti_CallbackIdResource kResourceCallbacks[] = {
    CUPTI_CBID_RESOURCE_CONTEXT_CREATED, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
    CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED};

std::string VersionText(uint32_t version) {
  // CUPTI_API_VERSION 130001 is CUDA 13.0, CUPTI update 1.
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

}  // namespace

KernelTracer::KernelTracer(TraceSink* sink, TracerOptions options, std::optional<CuptiApi> api,
                           uint32_t ring_slots, std::unique_ptr<CounterCollector> counters)
    : sink_(sink),
      options_(std::move(options)),
      ring_slots_(ring_slots),
      injected_api_(std::move(api)),
      counters_(std::move(counters)) {
  if (counters_ != nullptr) counters_->UseAttentionFlag(&counter_attention_);
}

KernelTracer::~KernelTracer() {
  // Only tests destroy tracers (the injector's lives until the process ends).
  live_.store(false, std::memory_order_release);
  KernelTracer* self = this;
  active_.compare_exchange_strong(self, nullptr);
  if (subscriber_ != nullptr && api_.unsubscribe != nullptr) api_.unsubscribe(subscriber_);
}

TracingOutcome KernelTracer::Attach() noexcept {
  try {
    // Held across the attach's CUPTI calls: safe, because no callback ever takes it.
    std::lock_guard<std::mutex> lock(attach_mutex_);
    if (!attempted_) {
      attempted_ = true;
      outcome_ = AttachLocked();
    }
    return outcome_;
  } catch (...) {
    return TracingOutcome{false,
                          "kernel tracing could not start (out of memory): NVTX ranges only"};
  }
}

bool KernelTracer::attempted() const noexcept {
  std::lock_guard<std::mutex> lock(attach_mutex_);
  return attempted_;
}

TracingOutcome KernelTracer::AttachLocked() {
  std::string path = "a CUPTI table given by the caller";
  uint32_t version = CUPTI_API_VERSION;
  void* handle = nullptr;
  if (injected_api_.has_value()) {
    api_ = *injected_api_;
  } else {
    LoadedCupti loaded;
    std::string error;
    if (!LoadCupti(options_.cupti_path, &loaded, &error)) {
      if (counters_ != nullptr) counters_->Unavailable(error);
      return TracingOutcome{false, error + ": NVTX ranges only"};
    }
    api_ = loaded.api;
    path = loaded.path;
    version = loaded.version;
    handle = loaded.handle;
  }
  if (!api_.Complete()) {
    if (counters_ != nullptr) counters_->Unavailable("CUPTI is incomplete");
    return TracingOutcome{false, "CUPTI is incomplete: NVTX ranges only"};
  }
  KernelTracer* expected = nullptr;
  if (!active_.compare_exchange_strong(expected, this)) {
    if (counters_ != nullptr) counters_->Unavailable("another kernel tracer holds CUPTI");
    return TracingOutcome{false, "another kernel tracer is active in this process"};
  }
  ring_ = std::make_unique<LaunchRing>(ring_slots_);
  pool_ = std::make_unique<ActivityBufferPool>(options_.buffer_cap_bytes);
  joiner_ = std::make_unique<KernelJoiner>(ring_.get(), &nodes_);
  live_.store(true, std::memory_order_release);  // before any callback can fire

  CUptiResult result;
  char holder[128] = {};
  if (api_.subscribe_v2 != nullptr) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "flopscope";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = sizeof holder;
    result = api_.subscribe_v2(&subscriber_, &OnCallback, this, &params);
  } else {
    result = api_.subscribe(&subscriber_, &OnCallback, this);
  }
  AttachStep step = AttachStep::kSubscribe;
  if (result == CUPTI_SUCCESS) {
    // Kernel timestamps in CLOCK_REALTIME ns, like every other timestamp flopscope stores. It is
    // CUPTI's default on Linux already; registering it keeps that true if the default changes.
    // Only once the subscriber is ours (another tool's timestamps are not ours to change) and
    // before any activity kind is enabled.
    if (api_.activity_register_timestamp_callback != nullptr) {
      api_.activity_register_timestamp_callback(&RealtimeTimestamp);
    }
    step = AttachStep::kEnableCallbacks;
    EnableApiCallbacks(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE);
    EnableApiCallbacks(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE);
    result = enabled_api_callbacks_ > 0 ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
  }
  if (result == CUPTI_SUCCESS) {
    EnableResourceCallbacks();
    step = AttachStep::kRegisterBuffers;
    result = api_.activity_register_callbacks(&OnBufferRequested, &OnBufferCompleted);
  }
  if (result == CUPTI_SUCCESS) {
    step = AttachStep::kEnableActivity;
    result = api_.activity_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  }
  if (result != CUPTI_SUCCESS) {
    const std::string status = DescribeAttachFailure(step, result, api_.ResultText(result), holder);
    Detach(/*finalize=*/false);
    active_.store(nullptr, std::memory_order_release);
    if (counters_ != nullptr) counters_->Unavailable(status);
    return TracingOutcome{false, status};
  }
  EnableActivityKinds();
  if (counters_ != nullptr) counters_->Bind(api_, handle);
  // A forked child has none of CUPTI's threads; flushing there would hang or duplicate the
  // parent's records. Registered once per process, after the first successful attach.
  static const bool registered = pthread_atfork(nullptr, nullptr, &OnForkChild) == 0;
  (void)registered;
  return TracingOutcome{true,
                        "tracing kernels with CUPTI " + VersionText(version) + " (" + path + ")"};
}

bool KernelTracer::EnableApiCallbacks(CUpti_CallbackDomain domain, uint32_t end_cbid) {
  bool any = false;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) driver_roles_.assign(end_cbid, CallbackRole::kIgnore);
  for (uint32_t cbid = 1; cbid < end_cbid; ++cbid) {
    const char* name = nullptr;
    if (api_.get_callback_name(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) continue;
    const CallbackRole role = ClassifyApiCallback(name);
    if (role == CallbackRole::kIgnore) continue;
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) driver_roles_[cbid] = role;
    if (api_.enable_callback(1, subscriber_, domain, cbid) == CUPTI_SUCCESS) {
      ++enabled_api_callbacks_;
      any = true;
    }
  }
  return any;
}

bool KernelTracer::EnableResourceCallbacks() {
  bool all = true;
  for (CUpti_CallbackIdResource cbid : kResourceCallbacks) {
    // Without them graph kernels fall back to the graph launch's range and devices lack a chip
    // name: worth having, not worth failing for.
    all &= api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, cbid) == CUPTI_SUCCESS;
  }
  return all;
}

void KernelTracer::EnableActivityKinds() {
  for (CUpti_ActivityKind kind : kOptionalKinds) api_.activity_enable(kind);
}

void KernelTracer::Detach(bool finalize) {
  live_.store(false, std::memory_order_release);  // callbacks in flight finish as no-ops
  if (subscriber_ != nullptr) {
    api_.unsubscribe(subscriber_);
    subscriber_ = nullptr;
  }
  api_.activity_disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  for (CUpti_ActivityKind kind : kOptionalKinds) api_.activity_disable(kind);
  // After the forced flush and with no subscriber left, CUPTI can detach from the driver. Our
  // memory stays valid (the tracer is never freed), so a callback racing this is harmless.
  if (finalize) api_.finalize();
}

void CUPTIAPI KernelTracer::OnCallback(void* userdata, CUpti_CallbackDomain domain,
                                       CUpti_CallbackId cbid, const void* data) {
  auto* self = static_cast<KernelTracer*>(userdata);
  if (self == nullptr || data == nullptr || !self->live_.load(std::memory_order_acquire)) return;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API || domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    // The hot path: every launch of the job passes here, on the launching thread. Outside
    // counter windows they cost it one relaxed load.
    const auto* call = static_cast<const CUpti_CallbackData*>(data);
    if (self->counter_attention_.load(std::memory_order_relaxed) != 0) [[unlikely]] {
      self->OnApiCallbackCounting(domain, cbid, *call);
      return;
    }
    if (call->callbackSite != CUPTI_API_ENTER) return;
    self->ring_->Record(call->correlationId, self->sink_->CurrentContext());
    return;
  }
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    try {
      self->OnResource(cbid, data);
    } catch (...) {
      // Out of memory in a table insert: that node or chip goes unrecorded.
    }
  }
}

void KernelTracer::OnApiCallbackCounting(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                         const CUpti_CallbackData& call) {
  if (call.callbackSite != CUPTI_API_ENTER) {
    CountedExit(domain, cbid, call);
    return;
  }
  const RangeContext range = sink_->CurrentContext();
  const bool counted = CountedEnter(domain, cbid, call, range);
  ring_->Record(call.correlationId, range, counted);
}

bool KernelTracer::CountedEnter(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                const CUpti_CallbackData& call, RangeContext range) {
  // Ordinals come from the driver domain only: every launch goes through it (runtime launches
  // and cuBLAS's included), and counting both domains would give one kernel two ordinals.
  // Other activities are counted while a window counts (kernel replay slows them too).
  // GPU-TODO: whether a kernel's activity record carries the runtime call's correlation id or
  // the driver call's (the runtime one then gets counting_now(), not the collector's answer),
  // and whether memset/memcpy APIs that the driver implements with kernels make auto ranges
  // (they get no ordinal: such a range would show as a count mismatch, never a shift).
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid >= driver_roles_.size()) {
    return counters_->counting_now();
  }
  const CallbackRole role = driver_roles_[cbid];
  if (role != CallbackRole::kLaunch && role != CallbackRole::kGraphLaunch) {
    return counters_->counting_now();
  }
  return counters_->OnLaunchEnter(call, role == CallbackRole::kGraphLaunch, range);
}

void KernelTracer::CountedExit(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                               const CUpti_CallbackData& call) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid >= driver_roles_.size()) return;
  const CallbackRole role = driver_roles_[cbid];
  if (role == CallbackRole::kLaunch || role == CallbackRole::kGraphLaunch) {
    counters_->OnLaunchExit(call);
  }
}

void KernelTracer::OnResource(CUpti_CallbackId cbid, const void* data) {
  const auto* resource = static_cast<const CUpti_ResourceData*>(data);
  if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    // Its profiler's last pass is decoded now, while the context still exists.
    if (counters_ != nullptr) counters_->OnContextDestroying(resource->context);
    return;
  }
  if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    uint32_t device = 0;
    if (api_.get_device_id(resource->context, &device) != CUPTI_SUCCESS) return;
    CUpti_Device_GetChipName_Params params{};
    params.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
    params.deviceIndex = device;
    if (api_.device_get_chip_name(&params) != CUPTI_SUCCESS || params.pChipName == nullptr) return;
    if (counters_ != nullptr)
      counters_->OnContextCreated(resource->context, device, params.pChipName);
    std::vector<MetadataPair> metadata;
    devices_.AddChip(device, params.pChipName, &metadata);
    outbox_.Add({}, &metadata);
    return;
  }
  const auto* graph = static_cast<const CUpti_GraphData*>(resource->resourceDescriptor);
  if (graph == nullptr) return;
  uint64_t node_id = 0;
  if (api_.get_graph_node_id(graph->node, &node_id) != CUPTI_SUCCESS) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    // On the thread building the graph (inside the captured launch during stream capture).
    nodes_.NodeCreated(node_id, sink_->CurrentContext());
  } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
    uint64_t original_id = 0;
    if (api_.get_graph_node_id(graph->originalNode, &original_id) == CUPTI_SUCCESS) {
      nodes_.NodeCloned(node_id, original_id);
    }
  }
}

void CUPTIAPI KernelTracer::OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  KernelTracer* self = active_.load(std::memory_order_acquire);
  uint8_t* granted = nullptr;
  if (self != nullptr && self->live_.load(std::memory_order_acquire)) {
    granted = self->pool_->Acquire();
  }
  // A null buffer makes CUPTI drop records and count them (reported as CUPTI_DROPPED).
  *buffer = granted;
  *size = granted == nullptr ? 0 : self->pool_->buffer_bytes();
  *max_records = 0;  // as many as fit
}

void CUPTIAPI KernelTracer::OnBufferCompleted(CUcontext context, uint32_t stream_id,
                                              uint8_t* buffer, size_t /*size*/, size_t valid_size) {
  KernelTracer* self = active_.load(std::memory_order_acquire);
  if (self == nullptr) {
    std::free(buffer);  // cannot happen: buffers come from an active tracer's pool
    return;
  }
  if (self->live_.load(std::memory_order_acquire)) {
    try {
      self->ProcessBuffer(context, stream_id, buffer, valid_size);
    } catch (...) {
      // Out of memory: the rest of this buffer is lost; CUPTI must get control back regardless.
    }
  }
  self->pool_->Release(buffer);
}

void KernelTracer::ProcessBuffer(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                 size_t valid_size) {
  ParsedBuffer parsed;
  parsed.records = outbox_.TakeSpare();
  // As many as a buffer of kernel records holds; a spare has that room already.
  parsed.records.reserve(valid_size / sizeof(CUpti_ActivityKernel10) + 1);
  parsed.names.reserve(parsed.records.capacity());
  ParseActivityBuffer(api_.activity_get_next_record, buffer, valid_size, &parsed);
  uint64_t unnamed = 0;
  // Interned now: CUPTI's name strings live only as long as this buffer.
  names_.Resolve(&parsed.records, parsed.names, sink_, &unnamed);
  std::vector<KernelRecord> joined;
  {
    std::lock_guard<std::mutex> lock(join_mutex_);  // joiner state; no CUPTI call inside
    joiner_->Join(&parsed.records, &joined);
  }
  std::vector<MetadataPair> metadata;
  for (const DeviceFacts& device : parsed.devices) devices_.AddDevice(device, &metadata);
  uint64_t dropped = parsed.untimed + (parsed.truncated ? 1 : 0);
  size_t cupti_dropped = 0;
  if (api_.activity_get_num_dropped_records(context, stream_id, &cupti_dropped) == CUPTI_SUCCESS) {
    dropped += cupti_dropped;
  }
  if (dropped > 0) sink_->CountDropped(dropped);
  if (unnamed > 0) sink_->CountBufferFull(unnamed);
  if (outbox_.Add(std::move(joined), &metadata)) sink_->Wake();
  if (parsed.records.capacity() > 0) outbox_.ReturnSpare(std::move(parsed.records));
}

void KernelTracer::Collect(bool final) noexcept {
  if (!live_.load(std::memory_order_acquire)) return;
  try {
    // No lock held: FlushAll delivers buffers through OnBufferCompleted, on this thread or
    // CUPTI's, before it returns.
    api_.activity_flush_all(final ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    Deliver(final);
  } catch (...) {
    // Out of memory while delivering: what was taken is lost, the job goes on.
  }
  // Before detaching: at exit, running profilers are stopped and their last passes decoded.
  if (counters_ != nullptr) counters_->Collect(final);
  if (final) Detach(options_.finalize_at_exit);
}

void KernelTracer::Deliver(bool final) {
  std::vector<KernelRecord> released;
  KernelJoiner::Counters counters;
  {
    std::lock_guard<std::mutex> lock(join_mutex_);
    joiner_->Age(final, &released);
    counters = joiner_->counters();
  }
  TraceOutbox::Contents contents;
  if (!released.empty()) contents.batches.push_back(std::move(released));
  outbox_.Take(&contents);
  for (TraceOutbox::Batch& batch : contents.batches) {
    sink_->Enqueue(batch.data(), batch.size());
    outbox_.ReturnSpare(std::move(batch));
  }
  for (const MetadataPair& entry : contents.metadata) sink_->Metadata(entry.first, entry.second);
  if (contents.overflow > 0) sink_->CountBufferFull(contents.overflow);
  if (counters.launch_not_seen != reported_not_seen_) {
    reported_not_seen_ = counters.launch_not_seen;
    sink_->Metadata("kernels.launch_not_seen", std::to_string(reported_not_seen_));
  }
}

const KernelJoiner::Counters KernelTracer::JoinCounters() {
  std::lock_guard<std::mutex> lock(join_mutex_);
  return joiner_ == nullptr ? KernelJoiner::Counters{} : joiner_->counters();
}

void KernelTracer::OnForkChild() {
  // Async-signal-safe: one atomic load and one store.
  if (KernelTracer* tracer = active_.load(std::memory_order_acquire)) {
    tracer->live_.store(false, std::memory_order_release);
  }
}

uint64_t CUPTIAPI KernelTracer::RealtimeTimestamp() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace flopscope::injector::cupti
