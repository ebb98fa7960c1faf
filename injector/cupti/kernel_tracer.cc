#include "injector/cupti/kernel_tracer.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>

#include "injector/cupti/activity_parser.h"
#include "injector/cupti/callback_roles.h"
#include "injector/warn.h"

namespace flopscope::injector::cupti {
namespace {

constexpr CUpti_ActivityKind kOptionalKinds[] = {
    CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_DEVICE};

constexpr CUpti_CallbackIdResource kResourceCallbacks[] = {
    CUPTI_CBID_RESOURCE_CONTEXT_CREATED, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
    CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED};

// How deep this thread is inside cu*/cudaGraphInstantiate* (D10).
thread_local uint32_t t_instantiate_depth = 0;

uint64_t MonotonicNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

// How long the exit waits for a collection in progress on the exporter thread before it gives
// up on CUPTI (a flush that never returns must not hang the job's exit).
constexpr auto kExitWaitForCollect = std::chrono::milliseconds(2000);

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
  if (recorder_ != nullptr && ActiveRecorder() == recorder_.get()) SetActiveRecorder(nullptr);
  if (subscriber_ != nullptr && api_.unsubscribe != nullptr) (void)api_.unsubscribe(subscriber_);
}

TracingOutcome KernelTracer::Attach() noexcept {
  try {
    // Held across the attach's CUPTI calls: safe, because no callback ever takes it.
    MutexLock lock(&attach_mutex_);
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
  MutexLock lock(&attach_mutex_);
  return attempted_;
}

TracingOutcome KernelTracer::AttachLocked() {
  std::string status;
  std::string path = "a CUPTI table given by the caller";
  uint32_t version = CUPTI_API_VERSION;
  void* handle = nullptr;
  if (!LoadApi(&status, &path, &version, &handle)) {
    if (counters_ != nullptr) counters_->Unavailable(status);
    return TracingOutcome{false, status + ": NVTX ranges only"};
  }
  KernelTracer* expected = nullptr;
  if (!active_.compare_exchange_strong(expected, this)) {
    if (counters_ != nullptr) counters_->Unavailable("another kernel tracer holds CUPTI");
    return TracingOutcome{false, "another kernel tracer is active in this process"};
  }
  ring_ = std::make_unique<LaunchRing>(ring_slots_);
  pool_ = std::make_unique<ActivityBufferPool>(options_.buffer_cap_bytes);
  {
    MutexLock lock(&join_mutex_);
    joiner_ = std::make_unique<KernelJoiner>(ring_.get(), &nodes_);
  }
  live_.store(true, std::memory_order_release);  // before any callback can fire
  std::optional<AttachFailure> failure = Subscribe();
  if (!failure) failure = EnableCallbacks();
  if (failure) {
    const std::string why = DescribeAttachFailure(
        failure->step, failure->result, api_.ResultText(failure->result), failure->holder);
    Detach();  // D8: only what this attach did is undone (nothing, when subscribing failed)
    active_.store(nullptr, std::memory_order_release);
    if (counters_ != nullptr) counters_->Unavailable(why);
    return TracingOutcome{false, why};
  }
  if (counters_ != nullptr) counters_->Bind(api_, handle);
  if (recorder_ != nullptr) recorder_->NoteCupti(version, path);
  // A forked child has none of CUPTI's threads; flushing there would hang or duplicate the
  // parent's records. Registered once per process, after the first successful attach.
  static const bool registered = pthread_atfork(nullptr, nullptr, &OnForkChild) == 0;
  (void)registered;
  return TracingOutcome{true,
                        "tracing kernels with CUPTI " + VersionText(version) + " (" + path + ")"};
}

bool KernelTracer::LoadApi(std::string* status, std::string* path, uint32_t* version,
                           void** handle) {
  if (injected_api_.has_value()) {
    api_ = *injected_api_;
  } else {
    LoadedCupti loaded;
    if (!LoadCupti(options_.cupti_path, &loaded, status)) return false;
    api_ = loaded.api;
    *path = loaded.path;
    *version = loaded.version;
    *handle = loaded.handle;
  }
  if (!api_.Complete()) {
    *status = "CUPTI is incomplete";
    return false;
  }
  if (!options_.record_dir.empty()) {
    std::string error;
    recorder_ = Recorder::Open(options_.record_dir, api_.activity_get_next_record, &error);
    if (recorder_ == nullptr) Warn("not recording GPU activity: " + error);
    SetActiveRecorder(recorder_.get());  // the counter windows record their images through it
  }
  return true;
}

std::optional<KernelTracer::AttachFailure> KernelTracer::Subscribe() {
  AttachFailure failure;
  char holder[128] = {};
  if (api_.subscribe_v2 != nullptr) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "flopscope";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = sizeof holder;
    failure.result = api_.subscribe_v2(&subscriber_, &OnCallback, this, &params);
  } else {
    failure.result = api_.subscribe(&subscriber_, &OnCallback, this);
  }
  if (failure.result != CUPTI_SUCCESS) {
    // D9: MULTIPLE_SUBSCRIBERS names the holder (nsys, ncu, DCGM, Kineto, cuda-gdb): the
    // status says so and nothing of CUPTI's is touched.
    subscriber_ = nullptr;
    failure.holder = holder;
    return failure;
  }
  // Kernel timestamps in CLOCK_REALTIME ns, like every other timestamp flopscope stores. It is
  // CUPTI's default on Linux already; registering it keeps that true if the default changes.
  // Only once the subscriber is ours (another tool's timestamps are not ours to change) and
  // before any activity kind is enabled.
  if (api_.activity_register_timestamp_callback != nullptr) {
    (void)api_.activity_register_timestamp_callback(&RealtimeTimestamp);  // optional, see above
  }
  return std::nullopt;
}

std::optional<KernelTracer::AttachFailure> KernelTracer::EnableCallbacks() {
  AttachFailure failure;
  failure.step = AttachStep::kEnableCallbacks;
  EnableApiCallbacks(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE);
  EnableApiCallbacks(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE);
  if (enabled_api_callbacks_ == 0) {
    failure.result = CUPTI_ERROR_INVALID_PARAMETER;
    return failure;
  }
  EnableResourceCallbacks();
  failure.step = AttachStep::kRegisterBuffers;
  failure.result = api_.activity_register_callbacks(&OnBufferRequested, &OnBufferCompleted);
  if (failure.result != CUPTI_SUCCESS) return failure;
  failure.step = AttachStep::kEnableActivity;
  failure.result = EnableKind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (failure.result != CUPTI_SUCCESS) return failure;
  // Worth having, not worth failing for: without them only kernels are traced.
  for (CUpti_ActivityKind kind : kOptionalKinds) (void)EnableKind(kind);
  return std::nullopt;
}

bool KernelTracer::EnableApiCallbacks(CUpti_CallbackDomain domain, uint32_t end_cbid) {
  bool any = false;
  std::vector<CallbackRole>& roles =
      domain == CUPTI_CB_DOMAIN_DRIVER_API ? driver_roles_ : runtime_roles_;
  roles.assign(end_cbid, CallbackRole::kIgnore);
  for (uint32_t cbid = 1; cbid < end_cbid; ++cbid) {
    const char* name = nullptr;
    if (api_.get_callback_name(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) continue;
    const CallbackRole role = ClassifyApiCallback(name);
    if (role == CallbackRole::kIgnore) continue;
    if (api_.enable_callback(1, subscriber_, domain, cbid) == CUPTI_SUCCESS) {
      roles[cbid] = role;
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

CUptiResult KernelTracer::EnableKind(CUpti_ActivityKind kind) {
  const CUptiResult result = api_.activity_enable(kind);
  if (result == CUPTI_SUCCESS) enabled_kinds_.push_back(kind);
  return result;
}

std::string KernelTracer::DescribeDrops() const {
  const uint64_t own = drops_.cupti_own.load(std::memory_order_relaxed);
  const uint64_t copies = drops_.untimed_copies.load(std::memory_order_relaxed);
  const uint64_t kernels = drops_.untimed_kernels.load(std::memory_order_relaxed);
  const uint64_t truncated = drops_.truncated.load(std::memory_order_relaxed);
  const uint64_t replayed = replayed_untimed();
  // Whether our pool's cap made CUPTI drop (it asked for a buffer and got none), or CUPTI dropped
  // on its own (its device-side buffers, say), and how many buffers CUPTI still holds.
  const uint64_t refused = pool_ != nullptr ? pool_->refusals() : 0;
  const std::string refusals =
      refused == 0 ? ""
                   : " (" + std::to_string(refused) +
                         " of its buffer requests refused at the pool's cap of " +
                         std::to_string(pool_->cap_bytes() >> 20) + " MB; " +
                         std::to_string(buffers_completed_.load(std::memory_order_relaxed)) +
                         " buffers handed back, " + std::to_string(pool_->bytes_out() >> 20) +
                         " MB still out)";
  std::string text;
  if (own + copies + kernels + truncated > 0) {
    text = "kernel tracing lost " + std::to_string(own + copies + kernels + truncated) +
           " GPU activities (CUPTI_DROPPED): CUPTI's own drop count " + std::to_string(own) +
           refusals + ", memcpy/memset without timestamps " + std::to_string(copies) +
           ", uncounted kernels without timestamps " + std::to_string(kernels) +
           ", buffers cut short " + std::to_string(truncated);
  }
  if (replayed > 0) {
    text += (text.empty() ? "" : "; ") + std::to_string(replayed) +
            " counted kernels came without timestamps (kernel replay): not lost, their FLOPs "
            "are in the counter windows";
  }
  return text;
}

void KernelTracer::Detach() {
  // Once, at the end: what the loss line's CUPTI_DROPPED is made of.
  if (!drops_described_.exchange(true)) {
    try {
      if (const std::string drops = DescribeDrops(); !drops.empty()) Warn(drops);
    } catch (...) {
      // Out of memory formatting it: the counts are in the loss line regardless.
    }
  }
  live_.store(false, std::memory_order_release);  // callbacks in flight finish as no-ops
  if (subscriber_ != nullptr) {
    (void)api_.unsubscribe(subscriber_);  // nothing to do about a failure at this point
    subscriber_ = nullptr;
  }
  // D8: activity state is process-wide and another client (Kineto in the same libcupti) may
  // use kinds we never enabled: disable only ours.
  for (CUpti_ActivityKind kind : enabled_kinds_) (void)api_.activity_disable(kind);
  enabled_kinds_.clear();
}

void CUPTIAPI KernelTracer::OnCallback(void* userdata, CUpti_CallbackDomain domain,
                                       CUpti_CallbackId cbid, const void* data) {
  auto* self = static_cast<KernelTracer*>(userdata);
  if (self == nullptr || data == nullptr || !self->live_.load(std::memory_order_acquire)) return;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API || domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    // The hot path: every launch of the job passes here, on the launching thread. Outside
    // counter windows they cost it a role lookup (graph instantiation, D10) and one relaxed
    // load.
    const auto* call = static_cast<const CUpti_CallbackData*>(data);
    if (self->RoleOf(domain, cbid) == CallbackRole::kGraphInstantiate) [[unlikely]] {
      self->OnGraphInstantiate(*call);
      return;
    }
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

void KernelTracer::OnGraphInstantiate(const CUpti_CallbackData& call) {
  // D10: nodes CUPTI reports as created inside cu*/cudaGraphInstantiate* are the executable
  // graph's copies (NVIDIA's cuda_graphs_trace sample skips them too); their range comes from
  // GRAPHNODE_CLONED, never from whatever range happens to be open at instantiation. A depth,
  // not a flag: the runtime's instantiate nests the driver's.
  if (call.callbackSite == CUPTI_API_ENTER) {
    ++t_instantiate_depth;
  } else if (t_instantiate_depth > 0) {
    --t_instantiate_depth;
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
  // the driver call's (the runtime one then gets counting_now(), not the collector's answer).
  // A memcpy/memset the driver carries out with a kernel makes an auto range no launch
  // announced: it ends the pass instead of taking an ordinal (OnMemoryEnter).
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid >= driver_roles_.size()) {
    return counters_->counting_now();
  }
  const CallbackRole role = driver_roles_[cbid];
  if (role == CallbackRole::kMemory) return counters_->OnMemoryEnter(call);
  if (role != CallbackRole::kLaunch && role != CallbackRole::kGraphLaunch) {
    return counters_->counting_now();
  }
  return counters_->OnLaunchEnter(call, role == CallbackRole::kGraphLaunch, range);
}

void KernelTracer::CountedExit(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                               const CUpti_CallbackData& call) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid >= driver_roles_.size()) return;
  const CallbackRole role = driver_roles_[cbid];
  if (role == CallbackRole::kLaunch || role == CallbackRole::kGraphLaunch ||
      role == CallbackRole::kMemory) {
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
    if (recorder_ != nullptr) recorder_->NoteChip(device, params.pChipName);
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
    // Nodes created by an instantiation get their range from GRAPHNODE_CLONED (D10).
    if (t_instantiate_depth == 0) nodes_.NodeCreated(node_id, sink_->CurrentContext());
    // Inside a counted launch: it was captured, runs no kernel, makes no range (D7).
    if (counters_ != nullptr) counters_->OnGraphNodeCreated();
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
  // CUPTI hazard: rejecting buffers crashed CUPTI before API version 27 (CUDA 12.9; Kineto's
  // CuptiActivityApi.cpp says so). Safe here only because counters/cupti_library.h refuses any
  // libcupti older than 130000 (kMinimumCuptiVersion); lower that and this line must change.
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
  self->buffers_completed_.fetch_add(1, std::memory_order_relaxed);
  if (self->live_.load(std::memory_order_acquire)) {
    // Before parsing: the recording keeps the bytes exactly as CUPTI handed them.
    if (self->recorder_ != nullptr) self->recorder_->RecordActivityBuffer(buffer, valid_size);
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
  uint32_t newest = 0;
  for (const KernelRecord& record : parsed.records) {
    newest = std::max(newest, static_cast<uint32_t>(record.correlation_id));
  }
  uint32_t seen = last_delivered_correlation_.load(std::memory_order_relaxed);
  while (newest > seen && !last_delivered_correlation_.compare_exchange_weak(
                              seen, newest, std::memory_order_relaxed)) {
  }
  std::vector<KernelRecord> joined;
  {
    MutexLock lock(&join_mutex_);  // joiner state; no CUPTI call inside
    joiner_->Join(&parsed.records, &joined);
  }
  std::vector<MetadataPair> metadata;
  for (const DeviceFacts& device : parsed.devices) devices_.AddDevice(device, &metadata);
  uint64_t dropped = parsed.untimed + (parsed.truncated ? 1 : 0);
  drops_.untimed_copies.fetch_add(parsed.untimed, std::memory_order_relaxed);
  if (parsed.truncated) drops_.truncated.fetch_add(1, std::memory_order_relaxed);
  for (uint32_t correlation_id : parsed.untimed_kernels) {
    // Kernel replay gives the kernels it profiled no timestamps: those are counted launches,
    // whose FLOPs and window record say what ran; any other untimed kernel is a loss.
    RangeContext launch;
    bool counted = false;
    const bool found =
        ring_->Find(correlation_id, &launch, &counted) == LaunchRing::Outcome::kFound;
    if (found && counted) {
      replayed_untimed_.fetch_add(1, std::memory_order_relaxed);
    } else {
      drops_.untimed_kernels.fetch_add(1, std::memory_order_relaxed);
      ++dropped;
    }
  }
  size_t cupti_dropped = 0;
  if (api_.activity_get_num_dropped_records(context, stream_id, &cupti_dropped) == CUPTI_SUCCESS) {
    dropped += cupti_dropped;
    drops_.cupti_own.fetch_add(cupti_dropped, std::memory_order_relaxed);
  }
  if (dropped > 0) sink_->CountDropped(dropped);
  if (unnamed > 0) sink_->CountBufferFull(unnamed);
  if (outbox_.Add(std::move(joined), &metadata)) sink_->Wake();
  if (parsed.records.capacity() > 0) outbox_.ReturnSpare(std::move(parsed.records));
}

void KernelTracer::Collect(bool final) noexcept {
  // Not live and never finished: attach failed, or a forked child (whose copy of the lock may
  // be held forever). Finished (exit, takeover, abandoned): what waits is still delivered.
  if (!live_.load(std::memory_order_acquire) && !cupti_done_.load(std::memory_order_acquire)) {
    return;
  }
  MutexLock lock(&collect_mutex_);
  CollectLocked(final);
}

void KernelTracer::CollectLocked(bool final) {
  const bool cupti =
      live_.load(std::memory_order_acquire) && !cupti_done_.load(std::memory_order_acquire);
  try {
    // No lock that a callback takes is held: FlushAll delivers buffers through
    // OnBufferCompleted, on this thread or CUPTI's, before it returns.
    // Forced from the first cycle that sees a counter window, counting or finished (it may
    // open and close between two cycles). Across a window's kernel replay CUPTI keeps every
    // buffer it is given partly filled and hands one back only to a forced flush; our pool, at
    // its cap, then refused it new ones (GPU acceptance on an H200, 2026-11-26: every record of
    // the ~10 steps after the torch job's window lost as CUPTI_DROPPED, and under a 1024 MB cap
    // CUPTI simply took 256 buffers). Flushing forced once, a cycle after the window's record,
    // came too late; this passes `torch-after-window` on the device.
    window_seen_ =
        window_seen_ ||
        (counters_ != nullptr && (counters_->counting_now() || counters_->windows_finished() > 0));
    const bool forced = final || window_seen_;
    if (cupti) (void)api_.activity_flush_all(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    // FinishAtExit flushed already, or the tracer stopped: what waits is still delivered.
    if (joiner_ != nullptr) Deliver(final);
  } catch (...) {
    // Out of memory while delivering: what was taken is lost, the job goes on.
  }
  if (!cupti) return;
  if (!final && CheckTakeover()) return;
  // Before detaching: at exit, running profilers are stopped and their last passes decoded.
  if (counters_ != nullptr) counters_->Collect(final);
  if (!final) return;
  // The final cycle makes CUPTI calls only when FinishAtExit could not run (no exit handler).
  Detach();
  if (options_.finalize_at_exit) (void)api_.finalize();  // opt-in only: see D2 in docs
  cupti_done_.store(true, std::memory_order_release);
}

void KernelTracer::FinishAtExit() noexcept {
  if (exit_finished_.exchange(true)) return;
  if (!live_.load(std::memory_order_acquire) || cupti_done_.load(std::memory_order_acquire)) {
    return;
  }
  // The exporter may be inside its own cycle (a flush): wait for it, bounded, then give up on
  // CUPTI rather than hang the job's exit.
  const auto deadline = std::chrono::steady_clock::now() + kExitWaitForCollect;
  while (!collect_mutex_.TryLock()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      cupti_done_.store(true, std::memory_order_release);
      Warn("kernel tracing: a CUPTI flush did not return; the last kernels are not reported");
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  try {
    // As NVIDIA's samples do at exit (cupti_trace_injection's DeInitCuptiTrace): unsubscribe,
    // then a forced flush, on this thread, while CUDA is still whole. No cuptiFinalize unless
    // asked for (FLOPSCOPE_CUPTI_FINALIZE=1): from exit() it races other threads (D2).
    if (subscriber_ != nullptr) {
      (void)api_.unsubscribe(subscriber_);  // nothing to do about a failure at exit
      subscriber_ = nullptr;
    }
    (void)api_.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    // The windows' last passes are stopped and decoded here, on the exiting thread.
    if (counters_ != nullptr) counters_->Collect(/*final=*/true);
    Detach();
    if (options_.finalize_at_exit) (void)api_.finalize();
  } catch (...) {
    // Nothing here allocates on purpose; whatever went wrong, exit goes on.
  }
  cupti_done_.store(true, std::memory_order_release);
  collect_mutex_.Unlock();
}

void KernelTracer::Abandon() noexcept {
  // A CUPTI call still in progress on the exporter thread is beyond help; none follows it.
  cupti_done_.store(true, std::memory_order_release);
}

bool KernelTracer::CheckTakeover() {
  // A counter window changes how kernels run (the range profiler serializes and replays them)
  // and the activity buffers may stay away while it is open: no conclusion then, and the watch
  // starts over after it. (GPU acceptance, H200, 2026-11-25: a counted torch job reported this
  // takeover and then never ended; stopping CUPTI with a profiler mid-window is the suspect.)
  if (counters_ != nullptr && counters_->wants_launches()) {
    stall_since_ns_ = 0;
    return false;
  }
  const uint64_t buffers = buffers_completed_.load(std::memory_order_relaxed);
  const uint64_t now = MonotonicNs();
  if (buffers != buffers_seen_at_check_ || stall_since_ns_ == 0) {
    buffers_seen_at_check_ = buffers;
    stall_since_ns_ = now;
    return false;
  }
  if (now - stall_since_ns_ < options_.takeover_stall_ms * 1000000) return false;
  stall_since_ns_ = now;  // look again after another stall period
  // Launches keep coming (their ids are in the ring, past the last record delivered) but no
  // buffer has come back for the whole period: another client's cuptiActivityRegisterCallbacks
  // took the buffers (buffer callbacks are process-wide and carry no user data), or it disabled
  // the kinds. A job with no launches, or with long kernels only, has too few to count.
  const uint32_t from = last_delivered_correlation_.load(std::memory_order_relaxed);
  const uint32_t window = std::min<uint32_t>(ring_->slots(), 1u << 16);
  uint32_t launches = 0;
  RangeContext unused;
  for (uint32_t id = from + 1; id != from + 1 + window && launches < kTakeoverLaunches; ++id) {
    if (ring_->Find(id, &unused) == LaunchRing::Outcome::kFound) ++launches;
  }
  if (launches < kTakeoverLaunches) return false;
  Warn(kTakeoverStatus);
  sink_->Metadata("gpu.status", kTakeoverStatus);
  // Stop cleanly: no callbacks, no more CUPTI calls. The kinds stay enabled (the other client
  // now owns the buffers they fill) and the subscription is left to it (a finalize by it may
  // have ended ours already).
  live_.store(false, std::memory_order_release);
  cupti_done_.store(true, std::memory_order_release);
  return true;
}

void KernelTracer::Deliver(bool final) {
  std::vector<KernelRecord> released;
  KernelJoiner::Counters counters;
  {
    MutexLock lock(&join_mutex_);
    joiner_->Age(final, &released);
    counters = joiner_->counters();
  }
  TraceOutbox::Contents contents;
  if (!released.empty()) contents.batches.push_back(std::move(released));
  outbox_.Take(&contents);
  for (TraceOutbox::Batch& batch : contents.batches) {
    if (recorder_ != nullptr) recorder_->RecordAttribution(batch.data(), batch.size());
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
  MutexLock lock(&join_mutex_);
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
