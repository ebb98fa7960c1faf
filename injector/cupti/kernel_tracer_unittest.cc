#include "injector/cupti/kernel_tracer.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "injector/cupti/testing/activity_buffer_builder.h"
#include "injector/cupti/testing/fake_cupti.h"
#include "injector/cupti/testing/recording_sink.h"

namespace flopscope::injector::cupti {
namespace {

using testing::ActivityBufferBuilder;
using testing::FakeCupti;
using testing::RecordingSink;

constexpr int kDriver = CUPTI_CB_DOMAIN_DRIVER_API;
constexpr int kRuntime = CUPTI_CB_DOMAIN_RUNTIME_API;
constexpr int kResource = CUPTI_CB_DOMAIN_RESOURCE;

TracerOptions Options(bool finalize = true) {
  TracerOptions options;
  options.buffer_cap_bytes = 8u << 20;
  options.finalize_at_exit = finalize;
  return options;
}

// A launch as CUPTI reports it to the subscriber: API enter, then exit.
void Launch(FakeCupti& fake, uint32_t correlation_id, int domain = kDriver, uint32_t cbid = 307) {
  CUpti_CallbackData data{};
  data.callbackSite = CUPTI_API_ENTER;
  data.functionName = "cuLaunchKernel";
  data.correlationId = correlation_id;
  fake.callback(fake.userdata, static_cast<CUpti_CallbackDomain>(domain), cbid, &data);
  data.callbackSite = CUPTI_API_EXIT;
  // A range pushed between enter and exit must not change the launch's attribution.
  RecordingSink::SetThreadContext(RangeContext{999, 999});
  fake.callback(fake.userdata, static_cast<CUpti_CallbackDomain>(domain), cbid, &data);
}

void LaunchIn(FakeCupti& fake, RangeContext context, uint32_t correlation_id) {
  RecordingSink::SetThreadContext(context);
  Launch(fake, correlation_id);
  RecordingSink::SetThreadContext(RangeContext{});
}

// Delivers the records the way CUPTI does: a buffer from the tracer, filled, completed.
void Deliver(ActivityBufferBuilder& builder) {
  uint8_t* buffer = nullptr;
  size_t size = 0, max_records = 0;
  KernelTracer::OnBufferRequested(&buffer, &size, &max_records);
  ASSERT_NE(buffer, nullptr);
  ASSERT_GE(size, builder.size());
  const size_t valid = builder.CopyTo(buffer);
  KernelTracer::OnBufferCompleted(nullptr, 0, buffer, size, valid);
}

ActivityBufferBuilder::Kernel Kernel(uint32_t correlation_id, const char* name, uint64_t start) {
  ActivityBufferBuilder::Kernel kernel;
  kernel.correlation_id = correlation_id;
  kernel.name = name;
  kernel.start = start;
  kernel.end = start + 10;
  return kernel;
}

class KernelTracerTest : public ::testing::Test {
 protected:
  KernelTracerTest() {
    fake_.callback_names = {
        {{kDriver, 307}, "cuLaunchKernel"},          {{kDriver, 514}, "cuGraphLaunch"},
        {{kDriver, 279}, "cuMemcpyHtoDAsync_v2"},    {{kDriver, 10}, "cuCtxGetCurrent"},
        {{kRuntime, 211}, "cudaLaunchKernel_v7000"}, {{kRuntime, 3}, "cudaGetDevice_v3020"}};
  }
  ~KernelTracerTest() override { RecordingSink::SetThreadContext(RangeContext{}); }

  std::unique_ptr<KernelTracer> Attached(bool finalize = true) {
    auto tracer = std::make_unique<KernelTracer>(&sink_, Options(finalize), fake_.Api(), 64);
    const TracingOutcome outcome = tracer->Attach();
    EXPECT_TRUE(outcome.tracing) << outcome.status;
    return tracer;
  }

  FakeCupti fake_;
  RecordingSink sink_;
};

TEST_F(KernelTracerTest, AttachHooksEveryLaunchAndMemoryApiAndNothingElse) {
  auto tracer = std::make_unique<KernelTracer>(&sink_, Options(), fake_.Api(), 64);
  const TracingOutcome outcome = tracer->Attach();
  ASSERT_TRUE(outcome.tracing);
  EXPECT_NE(outcome.status.find("tracing kernels with CUPTI 13.0"), std::string::npos);
  EXPECT_TRUE(fake_.enabled_callbacks.contains({kDriver, 307}));
  EXPECT_TRUE(fake_.enabled_callbacks.contains({kDriver, 514}));
  EXPECT_TRUE(fake_.enabled_callbacks.contains({kDriver, 279}));
  EXPECT_TRUE(fake_.enabled_callbacks.contains({kRuntime, 211}));
  EXPECT_FALSE(fake_.enabled_callbacks.contains({kDriver, 10}));
  EXPECT_FALSE(fake_.enabled_callbacks.contains({kRuntime, 3}));
  EXPECT_TRUE(fake_.enabled_callbacks.contains({kResource, CUPTI_CBID_RESOURCE_CONTEXT_CREATED}));
  EXPECT_TRUE(fake_.enabled_callbacks.contains({kResource, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED}));
  EXPECT_TRUE(fake_.enabled_callbacks.contains({kResource, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED}));
  EXPECT_EQ(tracer->enabled_api_callbacks(), 4u);
  for (int kind :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
        CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_DEVICE}) {
    EXPECT_TRUE(fake_.enabled_kinds.contains(kind)) << kind;
  }
  EXPECT_TRUE(fake_.timestamp_callback_registered);
  EXPECT_TRUE(tracer->attempted());
}

TEST_F(KernelTracerTest, AnotherSubscriberLeavesNvtxOnlyAndSaysWho) {
  fake_.subscribe_result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  fake_.holder = "CUPTI for Nsight Systems";
  KernelTracer tracer(&sink_, Options(), fake_.Api(), 64);
  const TracingOutcome outcome = tracer.Attach();
  EXPECT_FALSE(outcome.tracing);
  EXPECT_EQ(outcome.status,
            "CUPTI is held by another tool (CUPTI for Nsight Systems): NVTX ranges only");
  EXPECT_TRUE(fake_.enabled_callbacks.empty());
  EXPECT_FALSE(fake_.timestamp_callback_registered);  // the other tool's clock is left alone
  // Idempotent, and collecting does nothing: no flush of a CUPTI we do not hold.
  EXPECT_EQ(tracer.Attach().status, outcome.status);
  tracer.Collect(/*final=*/true);
  EXPECT_TRUE(fake_.flushes.empty());
  EXPECT_FALSE(fake_.finalized);
}

TEST_F(KernelTracerTest, RestrictedProfilingUnsubscribesAndExplains) {
  fake_.activity_enable_result = CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
  KernelTracer tracer(&sink_, Options(), fake_.Api(), 64);
  const TracingOutcome outcome = tracer.Attach();
  EXPECT_FALSE(outcome.tracing);
  EXPECT_NE(outcome.status.find("restricted to administrators"), std::string::npos);
  EXPECT_TRUE(fake_.unsubscribed);
  // A failed tracer gives the process back: another may attach.
  FakeCupti* fake = &fake_;
  fake->activity_enable_result = CUPTI_SUCCESS;
  KernelTracer second(&sink_, Options(), fake_.Api(), 64);
  EXPECT_TRUE(second.Attach().tracing);
}

TEST_F(KernelTracerTest, KernelsFromSeveralThreadsAreAttributedToTheirLaunchRanges) {
  auto tracer = Attached();
  std::thread encoder([&] { LaunchIn(fake_, RangeContext{10, 100}, 1); });
  encoder.join();
  std::thread decoder([&] { LaunchIn(fake_, RangeContext{20, 200}, 2); });
  decoder.join();
  LaunchIn(fake_, RangeContext{}, 3);  // no range open: the root

  ActivityBufferBuilder builder;
  // Out of order, as streams finish: the decoder's kernel first.
  builder.AddKernel(Kernel(2, "_Z7decoderv", 5000))
      .AddKernel(Kernel(1, "_Z7encoderv", 1000))
      .AddKernel(Kernel(3, "_Z4rootv", 9000));
  Deliver(builder);
  tracer->Collect(false);

  const std::vector<KernelRecord> records = sink_.records();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(sink_.NameOf(records[0].name_id), "_Z7decoderv");
  EXPECT_EQ(records[0].path_id, 20u);
  EXPECT_EQ(records[0].range_instance_id, 200u);
  EXPECT_EQ(sink_.NameOf(records[1].name_id), "_Z7encoderv");
  EXPECT_EQ(records[1].path_id, 10u);
  EXPECT_EQ(records[2].path_id, 0u);
  EXPECT_EQ(records[2].start_ns, 9000);
}

TEST_F(KernelTracerTest, RuntimeLaunchCallbacksAttributeToo) {
  auto tracer = Attached();
  RecordingSink::SetThreadContext(RangeContext{7, 70});
  Launch(fake_, 11, kRuntime, 211);
  RecordingSink::SetThreadContext(RangeContext{});
  ActivityBufferBuilder builder;
  builder.AddKernel(Kernel(11, "_Z1kv", 100));
  Deliver(builder);
  tracer->Collect(false);
  ASSERT_EQ(sink_.records().size(), 1u);
  EXPECT_EQ(sink_.records()[0].path_id, 7u);
}

TEST_F(KernelTracerTest, UnseenLaunchesAreKeptAtTheRootAndCounted) {
  auto tracer = Attached();
  ActivityBufferBuilder builder;
  builder.AddKernel(Kernel(50, "_Z6orphanv", 100));
  Deliver(builder);
  tracer->Collect(false);
  EXPECT_TRUE(sink_.records().empty());  // waiting for a launch that may still show up
  tracer->Collect(false);
  const std::vector<KernelRecord> records = sink_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].path_id, 0u);
  const auto metadata = sink_.metadata();
  EXPECT_NE(std::find(metadata.begin(), metadata.end(),
                      std::make_pair(std::string("kernels.launch_not_seen"), std::string("1"))),
            metadata.end());
}

TEST_F(KernelTracerTest, MemoryActivitiesAreAttributedTheSameWay) {
  auto tracer = Attached();
  LaunchIn(fake_, RangeContext{5, 50}, 21);
  LaunchIn(fake_, RangeContext{6, 60}, 22);
  ActivityBufferBuilder builder;
  builder.AddMemcpy({.correlation_id = 21, .start = 10, .end = 30, .bytes = 1 << 20})
      .AddMemset({.correlation_id = 22, .start = 40, .end = 41, .bytes = 256});
  Deliver(builder);
  tracer->Collect(false);
  const std::vector<KernelRecord> records = sink_.records();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].kind, kActivityMemcpy);
  EXPECT_EQ(records[0].path_id, 5u);
  EXPECT_EQ(records[0].bytes, 1u << 20);
  EXPECT_EQ(records[0].name_id, 0u);
  EXPECT_EQ(records[1].kind, kActivityMemset);
  EXPECT_EQ(records[1].path_id, 6u);
}

TEST_F(KernelTracerTest, GraphKernelsFollowTheRangeThatCapturedTheirNodes) {
  auto tracer = Attached();
  int node_a = 0, node_b = 0, exec_node_a = 0;
  fake_.graph_node_ids = {{&node_a, 1001}, {&node_b, 1002}, {&exec_node_a, 2001}};
  auto resource = [&](CUpti_CallbackId cbid, CUpti_GraphData* graph) {
    CUpti_ResourceData data{};
    data.resourceDescriptor = graph;
    fake_.callback(fake_.userdata, CUPTI_CB_DOMAIN_RESOURCE, cbid, &data);
  };
  CUpti_GraphData created{};
  created.node = reinterpret_cast<CUgraphNode>(&node_a);
  RecordingSink::SetThreadContext(RangeContext{30, 300});  // capturing inside `Model/attn`
  resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &created);
  RecordingSink::SetThreadContext(RangeContext{});
  created.node = reinterpret_cast<CUgraphNode>(&node_b);  // captured with no range open
  resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &created);
  CUpti_GraphData cloned{};
  cloned.node = reinterpret_cast<CUgraphNode>(&exec_node_a);
  cloned.originalNode = reinterpret_cast<CUgraphNode>(&node_a);
  resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, &cloned);

  LaunchIn(fake_, RangeContext{40, 400}, 60);  // cuGraphLaunch inside `Model/step`
  ActivityBufferBuilder builder;
  ActivityBufferBuilder::Kernel a = Kernel(60, "_Z1av", 100);
  a.graph_id = 1;
  a.graph_node_id = 2001;
  ActivityBufferBuilder::Kernel b = Kernel(60, "_Z1bv", 200);
  b.graph_id = 1;
  b.graph_node_id = 1002;
  builder.AddKernel(a).AddKernel(b);
  Deliver(builder);
  tracer->Collect(false);
  const std::vector<KernelRecord> records = sink_.records();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].path_id, 30u);
  EXPECT_EQ(records[0].range_instance_id, 0u);
  EXPECT_EQ(records[1].path_id, 40u);
  EXPECT_EQ(records[1].range_instance_id, 400u);
}

TEST_F(KernelTracerTest, DevicesAndChipsBecomeMetadataOnce) {
  auto tracer = Attached();
  int context0 = 0, context1 = 0;
  fake_.context_devices = {{&context0, 0}, {&context1, 1}};
  fake_.chips = {{0, "GH100"}, {1, "GB100"}};
  for (int* context : {&context0, &context1, &context0}) {
    CUpti_ResourceData data{};
    data.context = reinterpret_cast<CUcontext>(context);
    fake_.callback(fake_.userdata, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED,
                   &data);
  }
  ActivityBufferBuilder builder;
  ActivityBufferBuilder::Device device;
  device.id = 1;
  device.name = "NVIDIA B200";
  device.sm_count = 148;
  device.major = 10;
  builder.AddDevice(device).AddDevice(device);
  Deliver(builder);
  tracer->Collect(false);
  const auto metadata = sink_.metadata();
  auto count = [&](const std::string& key, const std::string& value) {
    return std::count(metadata.begin(), metadata.end(), std::make_pair(key, value));
  };
  EXPECT_EQ(count("gpu.0.chip", "GH100"), 1);
  EXPECT_EQ(count("gpu.1.chip", "GB100"), 1);
  EXPECT_EQ(count("gpu.1.name", "NVIDIA B200"), 1);
  EXPECT_EQ(count("gpu.1.sm_count", "148"), 1);
  EXPECT_EQ(count("gpu.1.compute_capability", "100"), 1);
}

TEST_F(KernelTracerTest, DroppedUntimedAndTruncatedRecordsAreCounted) {
  auto tracer = Attached();
  fake_.dropped_per_buffer = 5;  // what cuptiActivityGetNumDroppedRecords reports
  ActivityBufferBuilder builder;
  ActivityBufferBuilder::Kernel untimed = Kernel(1, "_Z1uv", 0);
  untimed.end = 0;
  builder.AddKernel(untimed).AddKernel(Kernel(2, "_Z1cv", 10)).DropTail(16);
  Deliver(builder);
  tracer->Collect(false);
  EXPECT_EQ(sink_.dropped(), 5u + 1u + 1u);
  EXPECT_TRUE(sink_.records().empty());
  // The stderr line at the end says what the CUPTI_DROPPED loss is made of.
  EXPECT_EQ(tracer->DescribeDrops(),
            "kernel tracing lost 7 GPU activities (CUPTI_DROPPED): CUPTI's own drop count 5, "
            "memcpy/memset without timestamps 0, uncounted kernels without timestamps 1, buffers "
            "cut short 1");
}

TEST_F(KernelTracerTest, TheLossLineSaysWhenThePoolsCapRefusedCuptiBuffers) {
  auto tracer = Attached();  // an 8 MB cap: two 4 MB buffers
  std::vector<uint8_t*> held;
  for (int i = 0; i < 3; ++i) {
    uint8_t* buffer = nullptr;
    size_t size = 0, max_records = 0;
    KernelTracer::OnBufferRequested(&buffer, &size, &max_records);
    held.push_back(buffer);
  }
  EXPECT_EQ(held[2], nullptr);  // CUPTI drops, and counts, what it had no room for
  fake_.dropped_per_buffer = 9;
  for (uint8_t* buffer : {held[0], held[1]}) {
    KernelTracer::OnBufferCompleted(nullptr, 0, buffer, ActivityBufferPool::kBufferBytes, 0);
  }
  tracer->Collect(false);
  EXPECT_EQ(tracer->DescribeDrops(),
            "kernel tracing lost 18 GPU activities (CUPTI_DROPPED): CUPTI's own drop count 18 (1 "
            "of its buffer requests refused at the pool's cap of 8 MB; 2 buffers handed back, 0 MB "
            "still out), memcpy/memset without timestamps 0, uncounted kernels without "
            "timestamps 0, buffers cut short 0");
}

TEST_F(KernelTracerTest, CollectFlushesCuptiWithoutHoldingALockAndFinalizesAtExit) {
  auto tracer = Attached();
  LaunchIn(fake_, RangeContext{8, 80}, 70);
  // CUPTI delivers from inside cuptiActivityFlushAll: a lock held across it would deadlock.
  fake_.on_flush = [&](uint32_t) {
    ActivityBufferBuilder builder;
    builder.AddKernel(Kernel(70, "_Z5flushv", 100));
    Deliver(builder);
    fake_.on_flush = nullptr;
  };
  tracer->Collect(false);
  ASSERT_EQ(sink_.records().size(), 1u);
  EXPECT_EQ(sink_.records()[0].path_id, 8u);
  EXPECT_EQ(fake_.flushes, std::vector<uint32_t>{0});

  tracer->Collect(/*final=*/true);
  EXPECT_EQ(fake_.flushes.back(), static_cast<uint32_t>(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  EXPECT_TRUE(fake_.unsubscribed);
  EXPECT_TRUE(fake_.finalized);
  EXPECT_TRUE(fake_.enabled_kinds.empty());
  // Detached: later callbacks and collections are no-ops.
  LaunchIn(fake_, RangeContext{9, 90}, 71);
  tracer->Collect(true);
  EXPECT_EQ(fake_.flushes.size(), 2u);
}

TEST_F(KernelTracerTest, FinalizeOnlyWhenAskedFor) {
  EXPECT_FALSE(TracerOptions{}.finalize_at_exit);  // D2: off by default
  auto tracer = Attached(/*finalize=*/false);
  tracer->Collect(true);
  EXPECT_TRUE(fake_.unsubscribed);
  EXPECT_FALSE(fake_.finalized);
}

// D2/D3: the exit's CUPTI work runs on the exiting thread, like NVIDIA's samples: unsubscribe,
// a forced flush, our kinds disabled, no cuptiFinalize; the exporter's final cycle then only
// delivers.
TEST_F(KernelTracerTest, FinishAtExitFlushesOnTheExitingThreadAndLeavesNoCuptiCallAfter) {
  auto tracer = Attached(/*finalize=*/false);
  LaunchIn(fake_, RangeContext{8, 80}, 70);
  std::thread::id flushing_thread;
  fake_.on_flush = [&](uint32_t) {
    flushing_thread = std::this_thread::get_id();
    EXPECT_TRUE(fake_.unsubscribed);  // no launch callback races the last flush
    ActivityBufferBuilder builder;
    builder.AddKernel(Kernel(70, "_Z4exitv", 100));
    Deliver(builder);
    fake_.on_flush = nullptr;
  };
  tracer->FinishAtExit();
  EXPECT_EQ(flushing_thread, std::this_thread::get_id());
  EXPECT_EQ(fake_.flushes,
            std::vector<uint32_t>{static_cast<uint32_t>(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)});
  EXPECT_TRUE(fake_.enabled_kinds.empty());
  EXPECT_FALSE(fake_.finalized);
  EXPECT_TRUE(sink_.records().empty());  // delivered by the exporter, not the exiting thread
  tracer->FinishAtExit();                // idempotent
  tracer->Collect(/*final=*/true);
  EXPECT_EQ(fake_.flushes.size(), 1u);
  ASSERT_EQ(sink_.records().size(), 1u);
  EXPECT_EQ(sink_.records()[0].path_id, 8u);
}

TEST_F(KernelTracerTest, AnAbandonedTracerMakesNoCuptiCall) {
  auto tracer = Attached(/*finalize=*/true);
  tracer->Abandon();  // the exporter's Stop timed out at exit
  tracer->Collect(false);
  tracer->Collect(true);
  tracer->FinishAtExit();
  EXPECT_TRUE(fake_.flushes.empty());
  EXPECT_FALSE(fake_.unsubscribed);
  EXPECT_FALSE(fake_.finalized);
}

TEST_F(KernelTracerTest, TheExitGivesUpOnAFlushThatNeverReturns) {
  auto tracer = Attached(/*finalize=*/false);
  std::atomic<bool> in_flush{false}, release{false};
  fake_.on_flush = [&](uint32_t) {
    in_flush = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  std::thread exporter([&] { tracer->Collect(false); });
  while (!in_flush) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto start = std::chrono::steady_clock::now();
  tracer->FinishAtExit();  // bounded wait for the exporter's cycle, then no CUPTI call
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_FALSE(fake_.unsubscribed);
  release = true;
  exporter.join();
  fake_.on_flush = nullptr;
  tracer->Collect(true);
  EXPECT_EQ(fake_.flushes.size(), 1u);  // only the one that hung
}

// D8: activity state is process-wide; a failed attach leaves another client's kinds alone.
TEST_F(KernelTracerTest, AFailedAttachDisablesNothingItDidNotEnable) {
  // Kinds a CUPTI client already in the process (Kineto) enabled.
  fake_.enabled_kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY};
  fake_.subscribe_result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  KernelTracer held(&sink_, Options(), fake_.Api(), 64);
  EXPECT_FALSE(held.Attach().tracing);
  EXPECT_EQ(fake_.enabled_kinds.size(), 2u);
  EXPECT_TRUE(held.enabled_kinds().empty());

  fake_.subscribe_result = CUPTI_SUCCESS;
  fake_.enabled_kinds = {CUPTI_ACTIVITY_KIND_MEMSET};
  fake_.activity_enable_result = CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
  KernelTracer restricted(&sink_, Options(), fake_.Api(), 64);
  EXPECT_FALSE(restricted.Attach().tracing);
  EXPECT_TRUE(fake_.unsubscribed);
  EXPECT_TRUE(fake_.enabled_kinds.contains(CUPTI_ACTIVITY_KIND_MEMSET));
}

TEST_F(KernelTracerTest, ExitDisablesExactlyTheKindsThisTracerEnabled) {
  auto tracer = Attached(/*finalize=*/false);
  const std::vector<CUpti_ActivityKind> ours = tracer->enabled_kinds();
  EXPECT_EQ(ours.size(), 5u);
  fake_.enabled_kinds.insert(CUPTI_ACTIVITY_KIND_OVERHEAD);  // another client's
  tracer->FinishAtExit();
  EXPECT_EQ(fake_.enabled_kinds, std::set<int>{CUPTI_ACTIVITY_KIND_OVERHEAD});
}

// D10: nodes created inside cu*/cudaGraphInstantiate* are the executable graph's copies; they
// keep the range of the node they were cloned from, not the range open at instantiation.
TEST_F(KernelTracerTest, InstantiationDoesNotOverwriteTheCaptureRange) {
  fake_.callback_names[{kDriver, 643}] = "cuGraphInstantiateWithFlags";
  fake_.callback_names[{kRuntime, 310}] = "cudaGraphInstantiate_v10000";
  auto tracer = Attached();
  EXPECT_TRUE(fake_.enabled_callbacks.contains({kDriver, 643}));
  EXPECT_TRUE(fake_.enabled_callbacks.contains({kRuntime, 310}));
  int captured = 0, exec = 0, later = 0;
  fake_.graph_node_ids = {{&captured, 1001}, {&exec, 2001}, {&later, 3001}};
  auto resource = [&](CUpti_CallbackId cbid, int* node, int* original) {
    CUpti_GraphData graph{};
    graph.node = reinterpret_cast<CUgraphNode>(node);
    graph.originalNode = reinterpret_cast<CUgraphNode>(original);
    CUpti_ResourceData data{};
    data.resourceDescriptor = &graph;
    fake_.callback(fake_.userdata, CUPTI_CB_DOMAIN_RESOURCE, cbid, &data);
  };
  auto api = [&](int domain, uint32_t cbid, CUpti_ApiCallbackSite site) {
    CUpti_CallbackData data{};
    data.callbackSite = site;
    fake_.callback(fake_.userdata, static_cast<CUpti_CallbackDomain>(domain), cbid, &data);
  };
  RecordingSink::SetThreadContext(RangeContext{30, 300});  // capture inside `Model/attn`
  resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &captured, nullptr);
  RecordingSink::SetThreadContext(RangeContext{50, 500});  // instantiate inside `Other`
  api(kRuntime, 310, CUPTI_API_ENTER);
  api(kDriver, 643, CUPTI_API_ENTER);
  resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, &exec, &captured);
  resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &exec, nullptr);
  api(kDriver, 643, CUPTI_API_EXIT);
  resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &exec, nullptr);  // still in the runtime call
  api(kRuntime, 310, CUPTI_API_EXIT);
  resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &later, nullptr);  // built after: kept
  RecordingSink::SetThreadContext(RangeContext{});

  LaunchIn(fake_, RangeContext{40, 400}, 90);  // the graph launch
  ActivityBufferBuilder builder;
  ActivityBufferBuilder::Kernel a = Kernel(90, "_Z1av", 100);
  a.graph_id = 1;
  a.graph_node_id = 2001;
  ActivityBufferBuilder::Kernel c = Kernel(90, "_Z1cv", 200);
  c.graph_id = 1;
  c.graph_node_id = 3001;
  builder.AddKernel(a).AddKernel(c);
  Deliver(builder);
  tracer->Collect(false);
  const std::vector<KernelRecord> records = sink_.records();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].path_id, 30u);
  EXPECT_EQ(records[1].path_id, 50u);
}

// D9: another client's cuptiActivityRegisterCallbacks takes the buffers: launches go on, no
// buffer comes back. The tracer says so in gpu.status and stops making CUPTI calls.
TEST_F(KernelTracerTest, BuffersTakenByAnotherClientStopTracingWithAStatus) {
  TracerOptions options = Options(false);
  options.takeover_stall_ms = 0;
  KernelTracer tracer(&sink_, options, fake_.Api(), 1024);
  ASSERT_TRUE(tracer.Attach().tracing);
  tracer.Collect(false);  // the watch starts
  for (uint32_t id = 1; id <= KernelTracer::kTakeoverLaunches / 2; ++id) {
    LaunchIn(fake_, RangeContext{1, 1}, id);
  }
  tracer.Collect(false);  // too few launches to be sure
  EXPECT_TRUE(sink_.metadata().empty());
  for (uint32_t id = KernelTracer::kTakeoverLaunches / 2 + 1;
       id <= 2 * KernelTracer::kTakeoverLaunches; ++id) {
    LaunchIn(fake_, RangeContext{1, 1}, id);
  }
  tracer.Collect(false);
  const auto metadata = sink_.metadata();
  ASSERT_EQ(metadata.size(), 1u);
  EXPECT_EQ(metadata[0],
            std::make_pair(std::string("gpu.status"), std::string(KernelTracer::kTakeoverStatus)));
  const size_t flushes = fake_.flushes.size();
  tracer.Collect(false);
  tracer.FinishAtExit();
  tracer.Collect(true);
  EXPECT_EQ(fake_.flushes.size(), flushes);
  // The kinds now fill the other client's buffers: left enabled for it.
  EXPECT_TRUE(fake_.enabled_kinds.contains(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
}

TEST_F(KernelTracerTest, BuffersThatKeepComingAreNoTakeover) {
  TracerOptions options = Options(false);
  options.takeover_stall_ms = 0;
  KernelTracer tracer(&sink_, options, fake_.Api(), 1024);
  ASSERT_TRUE(tracer.Attach().tracing);
  for (uint32_t round = 0; round < 3; ++round) {
    ActivityBufferBuilder builder;
    for (uint32_t i = 1; i <= 2 * KernelTracer::kTakeoverLaunches; ++i) {
      const uint32_t id = round * 1000 + i;
      LaunchIn(fake_, RangeContext{1, 1}, id);
      builder.AddKernel(Kernel(id, "_Z1kv", id * 10));
    }
    Deliver(builder);
    tracer.Collect(false);
  }
  EXPECT_TRUE(sink_.metadata().empty());
  EXPECT_EQ(sink_.records().size(), 3u * 2 * KernelTracer::kTakeoverLaunches);
}

TEST_F(KernelTracerTest, AForkedChildNeitherFlushesNorRecords) {
  auto tracer = Attached();
  const size_t flushes_before = fake_.flushes.size();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    LaunchIn(fake_, RangeContext{1, 1}, 80);
    tracer->Collect(/*final=*/true);
    const bool quiet =
        fake_.flushes.size() == flushes_before && !fake_.finalized && sink_.records().empty();
    _exit(quiet ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent still traces.
  LaunchIn(fake_, RangeContext{2, 2}, 81);
  ActivityBufferBuilder builder;
  builder.AddKernel(Kernel(81, "_Z6parentv", 5));
  Deliver(builder);
  tracer->Collect(false);
  ASSERT_EQ(sink_.records().size(), 1u);
  EXPECT_EQ(sink_.records()[0].path_id, 2u);
}

// This machine's real libcupti with no CUDA driver: a clear status, never a crash.
TEST(KernelTracerNoDriverTest, RealCuptiWithoutADriverFallsBackToNvtxOnly) {
  if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD) != nullptr ||
      dlopen("libcuda.so.1", RTLD_LAZY) != nullptr) {
    GTEST_SKIP() << "a CUDA driver is present; this test is about machines without one";
  }
  RecordingSink sink;
  KernelTracer tracer(&sink, Options());
  const TracingOutcome outcome = tracer.Attach();
  EXPECT_FALSE(outcome.tracing);
  EXPECT_NE(outcome.status.find("NVTX ranges only"), std::string::npos) << outcome.status;
  tracer.Collect(true);
  EXPECT_TRUE(sink.records().empty());
}

}  // namespace
}  // namespace flopscope::injector::cupti
