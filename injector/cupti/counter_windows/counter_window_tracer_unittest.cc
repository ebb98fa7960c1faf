// Counter windows riding on the kernel tracer's CUPTI subscription: CUPTI's callbacks (a scripted
// CUPTI, range profiler and Host API) reach the collector through KernelTracer::OnCallback only
// while a window wants them, and the kernels launched in the window come out counted.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>

#include "injector/cupti/counter_windows/testing/fake_counter_backend.h"
#include "injector/cupti/counter_windows/testing/fake_range_profiler.h"
#include "injector/cupti/kernel_tracer.h"
#include "injector/cupti/testing/activity_buffer_builder.h"
#include "injector/cupti/testing/fake_cupti.h"
#include "injector/cupti/testing/recording_sink.h"

namespace flopscope::injector::cupti {
namespace {

using testing::ActivityBufferBuilder;
using testing::FakeCounterBackend;
using testing::FakeCupti;
using testing::FakeRangeProfiler;
using testing::RecordingSink;

constexpr int kDriver = CUPTI_CB_DOMAIN_DRIVER_API;
constexpr int kRuntime = CUPTI_CB_DOMAIN_RUNTIME_API;
constexpr uint32_t kLaunchKernel = 307;
constexpr uint32_t kGraphLaunch = 514;
constexpr uint32_t kRuntimeMemcpy = 41;
constexpr uint32_t kDriverMemset = CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async;

class CounterWindowTracerTest : public ::testing::Test {
 protected:
  CounterWindowTracerTest() { Build(TracerOptions{}, 64); }

  // (Re)builds the tracer and its collector (windows: step 1) with `options` and a launch ring
  // of `ring_slots`.
  void Build(TracerOptions options, uint32_t ring_slots) {
    tracer_.reset();
    fake_.callback_names = {{{kDriver, kLaunchKernel}, "cuLaunchKernel"},
                            {{kDriver, kGraphLaunch}, "cuGraphLaunch"},
                            {{kRuntime, kRuntimeMemcpy}, "cudaMemcpyAsync_v3020"},
                            {{kDriver, kDriverMemset}, "cuMemsetD32Async"}};
    fake_.context_devices = {{&gpu_, 0}};
    fake_.chips = {{0, "GH100"}};
    CounterSettings settings;
    std::string error;
    EXPECT_TRUE(ParseCounterWindows("steps=1", &settings, &error)) << error;
    auto collector = std::make_unique<CounterCollector>(&sink_, settings, profiler_.Api(),
                                                        std::make_unique<FakeCounterBackend>());
    options.buffer_cap_bytes = 8u << 20;
    tracer_ = std::make_unique<KernelTracer>(&sink_, options, fake_.Api(), ring_slots,
                                             std::move(collector));
    EXPECT_TRUE(tracer_->Attach().tracing);
    windows_ = tracer_->counter_windows();
  }
  ~CounterWindowTracerTest() override { RecordingSink::SetThreadContext(RangeContext{}); }

  CUcontext gpu() { return reinterpret_cast<CUcontext>(&gpu_); }

  void ContextEvent(CUpti_CallbackIdResource cbid) {
    CUpti_ResourceData data{};
    data.context = gpu();
    fake_.callback(fake_.userdata, CUPTI_CB_DOMAIN_RESOURCE, cbid, &data);
  }

  // An API call as CUPTI reports it to the subscriber; kernels run between enter and exit, and
  // so does `inside` (what CUPTI reports from within the call).
  void Api(int domain, uint32_t cbid, uint32_t correlation_id, int kernels,
           const char* name = "_Z6kernelv", const std::function<void()>& inside = {}) {
    CUpti_CallbackData data{};
    data.callbackSite = CUPTI_API_ENTER;
    data.correlationId = correlation_id;
    data.context = gpu();
    data.symbolName = name;
    fake_.callback(fake_.userdata, static_cast<CUpti_CallbackDomain>(domain), cbid, &data);
    if (inside) inside();
    for (int i = 0; i < kernels; ++i) profiler_.KernelRuns(gpu(), correlation_id);
    CUresult ok = CUDA_SUCCESS;
    data.callbackSite = CUPTI_API_EXIT;
    data.functionReturnValue = &ok;
    fake_.callback(fake_.userdata, static_cast<CUpti_CallbackDomain>(domain), cbid, &data);
  }
  void Launch(uint32_t correlation_id) { Api(kDriver, kLaunchKernel, correlation_id, 1); }

  // CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED for a kernel node (stream capture makes one).
  void GraphNodeCreated() {
    CUpti_GraphData graph{};
    graph.node = reinterpret_cast<CUgraphNode>(&node_);
    CUpti_ResourceData data{};
    data.context = gpu();
    data.resourceDescriptor = &graph;
    fake_.callback(fake_.userdata, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED,
                   &data);
  }

  // The activity records of kernels 1..n arrive and are collected; those in `untimed` without
  // timestamps, as kernel replay delivers the kernels it profiled.
  void DeliverKernels(uint32_t n, std::set<uint32_t> untimed = {}) {
    ActivityBufferBuilder builder;
    for (uint32_t id = 1; id <= n; ++id) {
      ActivityBufferBuilder::Kernel kernel;
      kernel.correlation_id = id;
      kernel.name = "_Z6kernelv";
      kernel.start = untimed.contains(id) ? 0 : 1000 * id;
      kernel.end = untimed.contains(id) ? 0 : kernel.start + 10;
      builder.AddKernel(kernel);
    }
    uint8_t* buffer = nullptr;
    size_t size = 0, max_records = 0;
    KernelTracer::OnBufferRequested(&buffer, &size, &max_records);
    ASSERT_NE(buffer, nullptr);
    KernelTracer::OnBufferCompleted(nullptr, 0, buffer, size, builder.CopyTo(buffer));
  }

  int gpu_ = 0;
  int node_ = 0;
  FakeCupti fake_;
  FakeRangeProfiler profiler_;
  RecordingSink sink_;
  std::unique_ptr<KernelTracer> tracer_;
  CounterWindows* windows_ = nullptr;
};

TEST_F(CounterWindowTracerTest, KernelsOfTheWindowAreCountedAndOnlyThose) {
  ASSERT_NE(windows_, nullptr);
  EXPECT_TRUE(fake_.enabled_callbacks.contains(
      {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING}));
  EXPECT_FALSE(windows_->RequestWindow(1, "", 1).accepted);  // no context yet
  ContextEvent(CUPTI_CBID_RESOURCE_CONTEXT_CREATED);         // the collector learns GH100

  windows_->OnStepBegin(0);
  Launch(1);  // step 0: not in the window
  windows_->OnStepEnd(0);
  EXPECT_TRUE(profiler_.calls.empty());
  windows_->OnStepBegin(1);
  RecordingSink::SetThreadContext(RangeContext{30, 300});
  Launch(2);
  Api(kRuntime, kRuntimeMemcpy, 3, 0);  // a copy in the window: slowed down, not a range
  Api(kDriver, kGraphLaunch, 4, 2);     // a graph launch: a pass of its own
  Launch(5);
  RecordingSink::SetThreadContext(RangeContext{});
  windows_->OnStepEnd(1);
  Launch(6);  // after the window: stops the profiler first, uncounted
  EXPECT_FALSE(profiler_.started(gpu()));

  DeliverKernels(6);
  tracer_->Collect(false);
  std::map<uint64_t, bool> counted;
  for (const KernelRecord& record : sink_.records())
    counted[record.correlation_id] = record.counted;
  EXPECT_EQ(counted, (std::map<uint64_t, bool>{
                         {1, false}, {2, true}, {3, true}, {4, true}, {5, true}, {6, false}}));

  std::map<uint64_t, KernelFlopsRecord> flops;
  for (KernelFlopsRecord& record : sink_.flops()) flops[record.correlation_id] = record;
  ASSERT_EQ(flops.size(), 3u);
  EXPECT_DOUBLE_EQ(flops[2].fp32, 10.0);
  EXPECT_EQ(flops[2].path_id, 30u);
  EXPECT_EQ(flops[2].range_instance_id, 300u);
  EXPECT_EQ(sink_.NameOf(flops[2].name_id), "_Z6kernelv");
  EXPECT_DOUBLE_EQ(flops[4].fp32, 2 * 20.0);  // the graph's two kernels
  EXPECT_DOUBLE_EQ(flops[5].fp64, 30.0);
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].kernels_counted, 3u);
  EXPECT_EQ(sink_.windows()[0].chip, "GH100");
}

// What the H200 showed on 2026-11-26: the kernels kernel replay profiled come without
// timestamps. Those are counted launches (their FLOPs and window record say what ran), not
// losses; an untimed kernel that was not counted still is one.
TEST_F(CounterWindowTracerTest, CountedKernelsWithoutTimestampsAreNotCountedAsLost) {
  ContextEvent(CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  windows_->OnStepBegin(0);
  Launch(1);
  windows_->OnStepEnd(0);
  windows_->OnStepBegin(1);
  Launch(2);
  Launch(3);
  windows_->OnStepEnd(1);
  Launch(4);
  DeliverKernels(4, {1, 2, 3});
  tracer_->Collect(false);
  EXPECT_EQ(tracer_->replayed_untimed(), 2u);
  EXPECT_EQ(sink_.dropped(), 1u);  // kernel 1: outside the window
  EXPECT_NE(tracer_->DescribeDrops().find("uncounted kernels without timestamps 1"),
            std::string::npos);
  EXPECT_NE(tracer_->DescribeDrops().find("; 2 counted kernels came without timestamps (kernel "
                                          "replay): not lost"),
            std::string::npos)
      << tracer_->DescribeDrops();
  ASSERT_EQ(sink_.records().size(), 1u);
  EXPECT_EQ(sink_.records()[0].correlation_id, 4u);
  EXPECT_EQ(sink_.flops().size(), 2u);
}

// A driver memset in a window goes through the tracer to the collector, which ends the pass
// before it: the kernel the driver runs for it makes no range, and the launches still pair.
TEST_F(CounterWindowTracerTest, ADriverMemsetInAWindowEndsThePassAndTheLaunchesPair) {
  ContextEvent(CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  windows_->OnStepBegin(0);
  windows_->OnStepEnd(0);
  windows_->OnStepBegin(1);
  Launch(1);
  Api(kDriver, kDriverMemset, 2, /*kernels=*/1, nullptr);  // the driver's own memset kernel
  Launch(3);
  windows_->OnStepEnd(1);
  Launch(4);
  DeliverKernels(4);
  tracer_->Collect(false);
  std::map<uint64_t, KernelFlopsRecord> flops;
  for (KernelFlopsRecord& record : sink_.flops()) flops[record.correlation_id] = record;
  EXPECT_EQ(flops.size(), 2u);
  EXPECT_TRUE(flops.contains(1) && flops.contains(3));
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].kernels_counted, 2u);
  EXPECT_EQ(sink_.windows()[0].ranges_unmatched, 0u);
  EXPECT_EQ(sink_.windows()[0].status, "");
}

// After the H200's counted torch window every kernel record of the job was lost: CUPTI kept
// every buffer it was given partly filled (256 of them under a 1024 MB cap). From the cycle
// after a window's record went out, every flush is forced, which hands back buffers that are
// not full.
TEST_F(CounterWindowTracerTest, EveryCycleAfterAWindowFinishedFlushesForced) {
  ContextEvent(CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  windows_->OnStepBegin(0);
  windows_->OnStepEnd(0);
  windows_->OnStepBegin(1);
  Launch(1);
  windows_->OnStepEnd(1);
  Launch(2);                // stops the window's profiler
  tracer_->Collect(false);  // evaluates it: the window's record goes out
  ASSERT_EQ(sink_.windows().size(), 1u);
  tracer_->Collect(false);
  tracer_->Collect(false);
  EXPECT_EQ(fake_.flushes, (std::vector<uint32_t>{0, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED,
                                                  CUPTI_ACTIVITY_FLAG_FLUSH_FORCED}));
}

// The buffers CUPTI keeps across the window's kernel replay come back while it counts: a cycle
// in the window flushes forced too, and so does every one after it.
TEST_F(CounterWindowTracerTest, ACycleWhileAWindowCountsFlushesForced) {
  ContextEvent(CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  windows_->OnStepBegin(0);
  windows_->OnStepEnd(0);
  tracer_->Collect(false);  // no window yet
  windows_->OnStepBegin(1);
  Launch(1);  // counted: the window counts
  tracer_->Collect(false);
  windows_->OnStepEnd(1);
  Launch(2);                // stops the window's profiler
  tracer_->Collect(false);  // before the window's record is out
  EXPECT_EQ(fake_.flushes, (std::vector<uint32_t>{0, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED,
                                                  CUPTI_ACTIVITY_FLAG_FLUSH_FORCED}));
}

TEST_F(CounterWindowTracerTest, AContextDestroyedInAWindowDecodesAndExitFinishesTheWindow) {
  ContextEvent(CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  windows_->OnStepBegin(0);
  windows_->OnStepEnd(0);
  windows_->OnStepBegin(1);
  Launch(1);
  Launch(2);
  ContextEvent(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  EXPECT_TRUE(profiler_.objects.empty());
  tracer_->Collect(/*final=*/true);  // exit inside the window
  EXPECT_EQ(sink_.flops().size(), 2u);
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].status, "the process exited before the window's last step");
  EXPECT_FALSE(fake_.finalized);  // never at exit by default (gpu-review D2)
}

// While a window is open, launches with no buffer back are no sign of another CUPTI client (the
// H200's counted torch job stopped tracing on that conclusion, mid-window, and never ended).
TEST_F(CounterWindowTracerTest, LaunchesWithoutBuffersInAWindowAreNoTakeover) {
  TracerOptions options;
  options.takeover_stall_ms = 0;  // conclude at the first check that sees enough launches
  Build(options, 1024);           // room for every launch: the check can see them all
  ContextEvent(CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  windows_->OnStepBegin(0);
  windows_->OnStepEnd(0);
  windows_->OnStepBegin(1);
  tracer_->Collect(false);  // the watch starts
  const uint32_t launches = KernelTracer::kTakeoverLaunches + 8;
  for (uint32_t id = 1; id <= launches; ++id) Launch(id);
  tracer_->Collect(false);
  tracer_->Collect(false);
  windows_->OnStepEnd(1);
  tracer_->Collect(false);  // after the window the watch starts over: no conclusion yet
  for (const auto& [key, value] : sink_.metadata()) {
    EXPECT_NE(value, KernelTracer::kTakeoverStatus) << key;
  }
  DeliverKernels(launches);  // the buffers come back once the window is over
  tracer_->Collect(false);
  size_t counted = 0;
  for (const KernelRecord& record : sink_.records()) counted += record.counted ? 1 : 0;
  EXPECT_EQ(sink_.records().size(), launches);
  EXPECT_EQ(counted, launches);
}

TEST_F(CounterWindowTracerTest, WithoutWindowsTheLaunchPathNeverReachesTheCollector) {
  ContextEvent(CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  for (uint32_t id = 1; id <= 100; ++id) Launch(id);
  EXPECT_TRUE(profiler_.calls.empty());
  EXPECT_EQ(profiler_.initializations, 0);
  DeliverKernels(100);
  tracer_->Collect(false);
  EXPECT_EQ(sink_.records().size(), 100u);
  for (const KernelRecord& record : sink_.records()) EXPECT_FALSE(record.counted);
  EXPECT_TRUE(sink_.windows().empty());
}

// D1 and D7 through the tracer's callbacks: an NCCL kernel is never replayed, and a launch
// captured into a graph (stream capture) gives its ordinal back when CUPTI reports its node.
TEST_F(CounterWindowTracerTest, CollectivesAndCapturedLaunchesTakeNoOrdinal) {
  fake_.graph_node_ids = {{&node_, 77}};
  ContextEvent(CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  windows_->OnStepBegin(0);
  windows_->OnStepEnd(0);
  windows_->OnStepBegin(1);
  Launch(1);
  Api(kDriver, kLaunchKernel, 2, 1, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  Api(kDriver, kLaunchKernel, 3, 0, "_Z6kernelv", [&] { GraphNodeCreated(); });  // captured
  Launch(4);
  windows_->OnStepEnd(1);
  Launch(5);
  tracer_->Collect(false);
  std::map<uint64_t, KernelFlopsRecord> flops;
  for (KernelFlopsRecord& record : sink_.flops()) flops[record.correlation_id] = record;
  ASSERT_EQ(flops.size(), 2u);
  EXPECT_DOUBLE_EQ(flops[1].fp32, 5.0);
  EXPECT_DOUBLE_EQ(flops[4].fp32, 20.0);
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].comm_kernels_excluded, 1u);
  EXPECT_EQ(sink_.windows()[0].ranges_unmatched, 0u);
  EXPECT_EQ(sink_.windows()[0].status, "");
}

}  // namespace
}  // namespace flopscope::injector::cupti
