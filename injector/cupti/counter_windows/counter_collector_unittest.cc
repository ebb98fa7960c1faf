// The counter collector driven the way the tracer and the step tracker drive it, against a
// scripted range profiler (FakeRangeProfiler plays the GPU: a kernel launched while its
// context's profiler runs becomes a range tagged with the launch's correlation id) and a
// scripted Host API (FakeCounterBackend: tag t gives fp32 = 5t, fp64 = 6t FLOPs). So every
// KernelFlops record shows which kernel's counters it got.
#include "injector/cupti/counter_windows/counter_collector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <thread>

#include "injector/cupti/counter_windows/testing/fake_counter_backend.h"
#include "injector/cupti/counter_windows/testing/fake_range_profiler.h"
#include "injector/cupti/testing/fake_cupti.h"
#include "injector/cupti/testing/recording_sink.h"

namespace flopscope::injector::cupti {
namespace {

using testing::FakeCounterBackend;
using testing::FakeCupti;
using testing::FakeRangeProfiler;
using testing::RecordingSink;

CUcontext Context(uintptr_t n) { return reinterpret_cast<CUcontext>(n); }
const CUcontext kGpu = Context(0x1000);
constexpr const char* kGemm = "_Z4gemmPfS_S_";
constexpr const char* kAllReduce =
    "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";

class CounterCollectorTest : public ::testing::Test {
 protected:
  void Make(const char* windows = nullptr, uint32_t max_ranges = 2048, uint32_t world_size = 1) {
    CounterSettings settings;
    settings.metric_set =
        counters::MetricSetKind::kCheap;  // these tests script the cheap set's counters
    std::string error;
    if (windows != nullptr) {
      ASSERT_TRUE(ParseCounterWindows(windows, &settings, &error)) << error;
    }
    settings.max_ranges = max_ranges;
    settings.world_size = world_size;
    auto backend = std::make_unique<FakeCounterBackend>();
    backend_ = backend.get();
    collector_ =
        std::make_unique<CounterCollector>(&sink_, settings, profiler_.Api(), std::move(backend));
    collector_->Bind(cupti_.Api(), nullptr);
    collector_->OnContextCreated(kGpu, 0, "GH100");
  }

  // One launch as CUPTI reports it: API enter, its kernels run on the GPU, API exit. Returns
  // whether the collector counted it.
  bool Launch(uint32_t correlation_id, RangeContext range = {}, CUcontext context = kGpu,
              bool graph = false, int kernels = 1, CUresult returned = CUDA_SUCCESS,
              const char* name = kGemm) {
    CUpti_CallbackData call{};
    call.callbackSite = CUPTI_API_ENTER;
    call.correlationId = correlation_id;
    call.context = context;
    call.symbolName = graph ? nullptr : name;
    const bool counted =
        collector_->wants_launches() && collector_->OnLaunchEnter(call, graph, range);
    for (int i = 0; i < kernels; ++i) profiler_.KernelRuns(context, correlation_id);
    call.callbackSite = CUPTI_API_EXIT;
    call.functionReturnValue = &returned;
    if (collector_->wants_launches()) collector_->OnLaunchExit(call);
    return counted;
  }

  void Step(int64_t step, std::initializer_list<uint32_t> launches) {
    collector_->OnStepBegin(step);
    for (uint32_t id : launches) Launch(id);
    collector_->OnStepEnd(step);
  }

  // A collective: NCCL's all-reduce kernel.
  bool LaunchAllReduce(uint32_t correlation_id) {
    return Launch(correlation_id, {}, kGpu, false, 1, CUDA_SUCCESS, kAllReduce);
  }

  // Only the API enter of a launch on `context` (its exit comes later, or from another thread).
  CUpti_CallbackData Enter(uint32_t correlation_id, const char* name, bool* counted) {
    CUpti_CallbackData call{};
    call.callbackSite = CUPTI_API_ENTER;
    call.correlationId = correlation_id;
    call.context = kGpu;
    call.symbolName = name;
    *counted = collector_->wants_launches() && collector_->OnLaunchEnter(call, false, {});
    return call;
  }
  void Exit(CUpti_CallbackData call) {
    call.callbackSite = CUPTI_API_EXIT;
    call.functionReturnValue = &ok_;
    if (collector_->wants_launches()) collector_->OnLaunchExit(call);
  }

  size_t Calls(const std::string& call) const {
    return static_cast<size_t>(std::count(profiler_.calls.begin(), profiler_.calls.end(), call));
  }

  std::map<uint64_t, KernelFlopsRecord> FlopsById() {
    std::map<uint64_t, KernelFlopsRecord> by_id;
    for (KernelFlopsRecord& record : sink_.flops()) by_id[record.correlation_id] = record;
    return by_id;
  }

  FakeCupti cupti_;
  FakeRangeProfiler profiler_;
  RecordingSink sink_;
  FakeCounterBackend* backend_ = nullptr;
  std::unique_ptr<CounterCollector> collector_;
  CUresult ok_ = CUDA_SUCCESS;
};

TEST_F(CounterCollectorTest, AWholeWindowGivesEachKernelItsFlopsAndOneWindowRecord) {
  Make("steps=1:2");
  Step(0, {1, 2});
  EXPECT_TRUE(profiler_.calls.empty());  // outside the window nothing touches the profiler
  EXPECT_FALSE(collector_->wants_launches());

  collector_->OnStepBegin(1);
  EXPECT_TRUE(sink_.ranges_counted());
  EXPECT_TRUE(collector_->wants_launches());
  sink_.SetPhase(PhaseContext{50, 1});
  EXPECT_TRUE(Launch(3, RangeContext{10, 100}));
  EXPECT_TRUE(Launch(4, RangeContext{11, 101}));
  collector_->OnStepEnd(1);
  collector_->OnStepBegin(2);
  sink_.SetPhase(PhaseContext{51, 2});
  EXPECT_TRUE(Launch(5, RangeContext{12, 102}));
  collector_->OnStepEnd(2);
  EXPECT_FALSE(sink_.ranges_counted());
  EXPECT_TRUE(profiler_.started(kGpu));  // stopped at the context's next launch, not here
  collector_->OnStepBegin(3);
  EXPECT_FALSE(Launch(6));
  EXPECT_FALSE(profiler_.started(kGpu));
  EXPECT_FALSE(collector_->wants_launches());
  collector_->Collect(false);

  std::map<uint64_t, KernelFlopsRecord> flops = FlopsById();
  ASSERT_EQ(flops.size(), 3u);
  for (uint64_t id : {3, 4, 5}) {
    EXPECT_DOUBLE_EQ(flops[id].fp32, 5.0 * id) << id;  // its own counters: nothing shifted
    EXPECT_DOUBLE_EQ(flops[id].fp64, 6.0 * id) << id;
    EXPECT_EQ(flops[id].name_id, sink_.InternName("_Z4gemmPfS_S_"));
    EXPECT_EQ(flops[id].device_id, 0u);
    EXPECT_TRUE(flops[id].tensor.empty());  // the cheap set has no tensor FLOPs
    EXPECT_EQ(flops[id].raw.size(), 4u);    // every counter kept for audit
  }
  EXPECT_EQ(flops[3].path_id, 10u);
  EXPECT_EQ(flops[4].range_instance_id, 101u);
  EXPECT_EQ(flops[3].phase_path_id, 50u);
  EXPECT_EQ(flops[3].counted_step, 1);
  EXPECT_EQ(flops[5].phase_path_id, 51u);
  EXPECT_EQ(flops[5].counted_step, 2);

  const std::vector<CounterWindowRecord> windows = sink_.windows();
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].first_step, 1);
  EXPECT_EQ(windows[0].last_step, 2);
  EXPECT_EQ(windows[0].trigger, "env: steps=1:2");
  EXPECT_EQ(windows[0].metric_set, "cheap");
  EXPECT_EQ(windows[0].chip, "GH100");
  EXPECT_EQ(windows[0].passes, 2u);
  EXPECT_EQ(windows[0].kernels_counted, 3u);
  EXPECT_EQ(windows[0].ranges_unmatched, 0u);
  EXPECT_EQ(windows[0].status, "");
  EXPECT_LE(windows[0].start_ns, windows[0].end_ns);
  EXPECT_EQ(sink_.unmatched(), 0u);
  EXPECT_EQ(profiler_.calls,
            (std::vector<std::string>{"enable 1", "initialize_image 1", "set_config 1", "start 1",
                                      "stop 1", "decode 1", "disable 1"}));
  EXPECT_TRUE(profiler_.auto_range_kernel_replay);
  EXPECT_EQ(profiler_.initializations, 1);
  EXPECT_EQ(backend_->plans_with_availability, 1);  // planned with the context's availability
}

TEST_F(CounterCollectorTest, AFullImageIsDecodedAndTheWindowGoesOn) {
  Make("steps=0", /*max_ranges=*/16);
  collector_->OnStepBegin(0);
  for (uint32_t id = 1; id <= 40; ++id) EXPECT_TRUE(Launch(id));
  collector_->OnStepEnd(0);
  Launch(41);
  collector_->Collect(false);
  EXPECT_EQ(profiler_.max_ranges, 16u);
  EXPECT_EQ(std::count(profiler_.calls.begin(), profiler_.calls.end(), "decode 1"), 3);
  // D12: every restarted pass is configured again with its re-initialised image.
  EXPECT_EQ(std::vector<std::string>(profiler_.calls.begin() + 4, profiler_.calls.begin() + 9),
            (std::vector<std::string>{"stop 1", "decode 1", "initialize_image 1", "set_config 1",
                                      "start 1"}));
  EXPECT_EQ(std::count(profiler_.calls.begin(), profiler_.calls.end(), "start 1"), 3);
  std::map<uint64_t, KernelFlopsRecord> flops = FlopsById();
  ASSERT_EQ(flops.size(), 40u);
  for (uint64_t id = 1; id <= 40; ++id) EXPECT_DOUBLE_EQ(flops[id].fp32, 5.0 * id) << id;
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].kernels_counted, 40u);
}

TEST_F(CounterCollectorTest, AnUnseenLaunchPairsNothingAndIsCountedAsALoss) {
  Make("steps=0");
  collector_->OnStepBegin(0);
  Launch(1);
  profiler_.KernelRuns(kGpu, 999);  // a kernel the launch callbacks never saw
  Launch(2);
  collector_->OnStepEnd(0);
  Launch(3);
  collector_->Collect(false);
  EXPECT_TRUE(sink_.flops().empty());  // never a shifted pairing
  EXPECT_EQ(sink_.unmatched(), 3u);
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].kernels_counted, 0u);
  EXPECT_EQ(sink_.windows()[0].ranges_unmatched, 3u);
  EXPECT_NE(sink_.windows()[0].status.find("3 counter ranges for 2 launches"), std::string::npos);
}

TEST_F(CounterCollectorTest, DroppedRangesAndFailedLaunchesPairNothing) {
  Make("every=1", /*max_ranges=*/16);
  profiler_.extra_dropped = {1};
  Step(1, {1, 2});
  collector_->OnStepBegin(2);
  Launch(3);
  Launch(4, {}, kGpu, false, 1, CUDA_ERROR_INVALID_VALUE);
  collector_->OnStepEnd(2);
  Step(3, {5});  // ends window 2; window 3 counts 5
  Launch(6);
  collector_->Collect(false);
  std::map<uint64_t, KernelFlopsRecord> flops = FlopsById();
  ASSERT_EQ(flops.size(), 1u);  // only step 3's kernel
  EXPECT_DOUBLE_EQ(flops[5].fp32, 25.0);
  const std::vector<CounterWindowRecord> windows = sink_.windows();
  ASSERT_EQ(windows.size(), 3u);
  EXPECT_NE(windows[0].status.find("CUPTI dropped 1 counter ranges"), std::string::npos);
  EXPECT_NE(windows[1].status.find("a launch in the pass failed"), std::string::npos);
  EXPECT_EQ(windows[2].status, "");
  EXPECT_EQ(sink_.unmatched(), 3u + 2u);  // max(2 launches, 2 + 1 dropped) + 2
}

TEST_F(CounterCollectorTest, OverlappingLaunchesOfTwoThreadsAreLeftOutAndTheRestPair) {
  Make("steps=0");
  collector_->OnStepBegin(0);
  Launch(1);
  CUpti_CallbackData a{}, b{};
  a.context = b.context = kGpu;
  a.correlationId = 2;
  b.correlationId = 3;
  CUresult ok = CUDA_SUCCESS;
  a.functionReturnValue = b.functionReturnValue = &ok;
  EXPECT_TRUE(collector_->OnLaunchEnter(a, false, {}));  // thread A inside the driver...
  EXPECT_TRUE(collector_->OnLaunchEnter(b, false, {}));  // ...when thread B enters
  profiler_.KernelRuns(kGpu, 3);                         // B's kernel got the earlier range
  profiler_.KernelRuns(kGpu, 2);
  collector_->OnLaunchExit(b);
  collector_->OnLaunchExit(a);
  Launch(4);
  collector_->OnStepEnd(0);
  collector_->Collect(/*final=*/true);
  std::map<uint64_t, KernelFlopsRecord> flops = FlopsById();
  ASSERT_EQ(flops.size(), 2u);  // 2 and 3 are not given each other's counters
  EXPECT_DOUBLE_EQ(flops[1].fp32, 5.0);
  EXPECT_DOUBLE_EQ(flops[4].fp32, 20.0);
  EXPECT_EQ(sink_.unmatched(), 2u);
  EXPECT_NE(sink_.windows()[0].status.find("order is unknown"), std::string::npos);
}

// Another thread launches while this one is inside cuptiRangeProfilerStart: it must neither wait
// for a lock held across the CUPTI call (that would hang here) nor be counted, and the pass it
// may have landed in cannot be paired.
TEST_F(CounterCollectorTest, ALaunchDuringAProfilerSwitchIsNotCountedAndTaintsThePass) {
  Make("steps=0");
  bool counted_meanwhile = true;
  profiler_.during_start = [&] {
    CUpti_CallbackData other{};
    other.context = kGpu;
    other.correlationId = 99;
    counted_meanwhile = collector_->OnLaunchEnter(other, false, {});
    profiler_.KernelRuns(kGpu, 99);  // the profiler was started already: CUPTI counts it
  };
  collector_->OnStepBegin(0);
  EXPECT_TRUE(Launch(1));
  EXPECT_FALSE(counted_meanwhile);
  Launch(2);
  collector_->OnStepEnd(0);
  collector_->Collect(/*final=*/true);
  EXPECT_TRUE(sink_.flops().empty());
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_NE(sink_.windows()[0].status.find("a launch came while the profiler was being switched"),
            std::string::npos)
      << sink_.windows()[0].status;
}

TEST_F(CounterCollectorTest, AGraphLaunchGetsAPassOfItsOwnAndTheSumOfItsRanges) {
  Make("steps=0");
  collector_->OnStepBegin(0);
  EXPECT_TRUE(Launch(1));
  EXPECT_TRUE(Launch(2, RangeContext{20, 200}, kGpu, /*graph=*/true, /*kernels=*/3));
  EXPECT_TRUE(Launch(3));
  collector_->OnStepEnd(0);
  Launch(4);
  collector_->Collect(false);
  std::map<uint64_t, KernelFlopsRecord> flops = FlopsById();
  ASSERT_EQ(flops.size(), 3u);
  EXPECT_DOUBLE_EQ(flops[1].fp32, 5.0);
  EXPECT_DOUBLE_EQ(flops[2].fp32, 3 * 5.0 * 2);  // its three kernels' counters added up
  EXPECT_EQ(flops[2].name_id, 0u);
  EXPECT_EQ(flops[2].path_id, 20u);
  EXPECT_DOUBLE_EQ(flops[3].fp32, 15.0);
  EXPECT_EQ(std::count(profiler_.calls.begin(), profiler_.calls.end(), "decode 1"), 3);
}

TEST_F(CounterCollectorTest, ASecondContextTakesTheProfilerInTurn) {
  Make("steps=0");
  const CUcontext other = Context(0x2000);
  collector_->OnContextCreated(other, 1, "GH100");
  collector_->OnStepBegin(0);
  EXPECT_TRUE(Launch(1));
  EXPECT_TRUE(Launch(2, {}, other));  // ends the first context's pass, starts this one
  EXPECT_FALSE(profiler_.started(kGpu));
  EXPECT_TRUE(Launch(3));
  collector_->OnStepEnd(0);
  collector_->Collect(/*final=*/true);  // exit: the running one is finished too
  std::map<uint64_t, KernelFlopsRecord> flops = FlopsById();
  ASSERT_EQ(flops.size(), 3u);
  EXPECT_EQ(flops[2].device_id, 1u);
  EXPECT_DOUBLE_EQ(flops[3].fp32, 15.0);
  // The first context's pass ends on the second's thread, with the first pushed current (D11).
  EXPECT_EQ(
      std::vector<std::string>(profiler_.calls.begin() + 4, profiler_.calls.begin() + 10),
      (std::vector<std::string>{"push 1", "stop 1", "decode 1", "disable 1", "pop 1", "enable 2"}));
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].kernels_counted, 3u);
}

TEST_F(CounterCollectorTest, ADestroyedContextHandsInItsLastPass) {
  Make("steps=0:9");
  collector_->OnStepBegin(0);
  Launch(1);
  Launch(2);
  collector_->OnContextDestroying(kGpu);
  EXPECT_TRUE(profiler_.objects.empty());  // disabled before the context goes
  collector_->OnStepEnd(0);
  collector_->Collect(false);
  EXPECT_EQ(FlopsById().size(), 2u);
  EXPECT_TRUE(sink_.windows().empty());  // steps 1-9 are still to come
  collector_->Collect(/*final=*/true);
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].status, "the process exited before the window's last step");
  EXPECT_EQ(sink_.windows()[0].kernels_counted, 2u);
}

TEST_F(CounterCollectorTest, HardwareBusyGivesAStatusAndTimingGoesOn) {
  Make("steps=0");
  profiler_.enable_result = CUPTI_ERROR_HARDWARE_BUSY;
  collector_->OnStepBegin(0);
  EXPECT_FALSE(Launch(1));
  EXPECT_FALSE(sink_.ranges_counted());  // nothing is replayed: ranges keep their latency
  EXPECT_FALSE(Launch(2));               // not tried again in this window
  collector_->OnStepEnd(0);
  collector_->Collect(false);
  EXPECT_TRUE(sink_.flops().empty());
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].status,
            "GPU performance counters are busy (DCGM profiling or another profiler holds them): "
            "no FLOPs counted, timing continues");
  EXPECT_EQ(std::count(profiler_.calls.begin(), profiler_.calls.end(), "start 1"), 0);
}

TEST_F(CounterCollectorTest, RestrictedProfilingAndUnknownChipsAreReported) {
  Make("every=1");
  profiler_.availability_result = CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
  Step(1, {1});
  profiler_.availability_result = CUPTI_SUCCESS;
  const CUcontext old_gpu = Context(0x3000);
  collector_->OnContextCreated(old_gpu, 2, "GV100");  // no metric set for it
  collector_->OnStepBegin(2);
  EXPECT_FALSE(Launch(2, {}, old_gpu));
  collector_->OnStepEnd(2);
  collector_->Collect(false);
  const std::vector<CounterWindowRecord> windows = sink_.windows();
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_NE(windows[0].status.find("NVreg_RestrictProfilingToAdminUsers"), std::string::npos);
  EXPECT_EQ(windows[1].status.find("no counters on GV100: chip GV100 has no metric set"), 0u);
  EXPECT_TRUE(profiler_.objects.empty());
}

TEST_F(CounterCollectorTest, OnDemandWindowsAreAcceptedOrRefusedWithTheReason) {
  CounterSettings settings;
  auto backend = std::make_unique<FakeCounterBackend>();
  CounterCollector collector(&sink_, settings, profiler_.Api(), std::move(backend));
  EXPECT_EQ(collector.RequestWindow(2, "", 1).message,
            "no counter windows: CUDA has not initialised in this process yet");
  collector.Unavailable("CUPTI is held by another tool (nsys)");
  EXPECT_EQ(collector.RequestWindow(2, "", 1).message,
            "no counter windows: CUPTI is held by another tool (nsys)");
  collector.Bind(cupti_.Api(), nullptr);
  EXPECT_EQ(collector.RequestWindow(2, "", 1).message,
            "no CUDA context in this process yet (it has not used the GPU)");
  collector.OnContextCreated(kGpu, 0, "GH100");
  EXPECT_EQ(collector.RequestWindow(2, "fast", 1).message,
            "unknown metric set 'fast' (full or cheap)");
  EXPECT_FALSE(collector.RequestWindow(0, "", 1).accepted);
  const ControlAnswer accepted = collector.RequestWindow(2, "full", 5);
  EXPECT_TRUE(accepted.accepted);
  EXPECT_EQ(accepted.message,
            "counting the next 2 steps (full, 6 passes); no step seen yet: windows open at "
            "`step` ranges (flopscope domain)");
  const ControlAnswer again = collector.RequestWindow(1, "", 6);
  EXPECT_FALSE(again.accepted);
  EXPECT_EQ(again.message,
            "a counter window is already waiting for the next step (daemon: control 5)");
  collector.OnStepBegin(7);
  EXPECT_EQ(collector.RequestWindow(1, "", 7).message,
            "a counter window is already open (steps 7-8, daemon: control 5)");
  collector.OnStepEnd(7);
  collector.OnStepBegin(8);
  collector.OnStepEnd(8);
  collector.Collect(false);
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].trigger, "daemon: control 5");
  EXPECT_EQ(sink_.windows()[0].metric_set, "full");
  EXPECT_EQ(sink_.windows()[0].first_step, 7);
  EXPECT_EQ(sink_.windows()[0].last_step, 8);
  EXPECT_EQ(sink_.windows()[0].status, "no kernel was launched during the window");
  const ControlAnswer next = collector.RequestWindow(1, "", 8);
  EXPECT_TRUE(next.accepted);
  EXPECT_EQ(next.message, "counting the next 1 step (full, 6 passes)");  // steps seen now
}

TEST_F(CounterCollectorTest, ARequestWhileTheLastWindowIsStillDecodedIsRefusedAsBusy) {
  Make("steps=0");
  collector_->OnStepBegin(0);
  Launch(1);
  collector_->OnStepEnd(0);  // closed; its profiler stops at the context's next launch
  EXPECT_EQ(collector_->RequestWindow(1, "", 4).message,
            "counters busy: the last window's counters are still being decoded");
  Launch(2);
  collector_->Collect(false);
  EXPECT_TRUE(collector_->RequestWindow(1, "", 5).accepted);
}

TEST_F(CounterCollectorTest, AnOldGpuIsRefusedOnRequest) {
  Make();
  backend_->chips = {"GA100"};
  const ControlAnswer answer = collector_->RequestWindow(2, "", 3);
  EXPECT_FALSE(answer.accepted);
  EXPECT_EQ(answer.message, "chip GH100 has no metric set in this flopscope (timing only)");
}

TEST_F(CounterCollectorTest, AnUncollectedCounterIsLeftOutOfTheAuditTrail) {
  Make("steps=0");
  backend_->time_uncollected = true;  // CUPTI's NaN: the daemon would refuse the whole batch
  collector_->OnStepBegin(0);
  Launch(3);
  collector_->OnStepEnd(0);
  collector_->Collect(/*final=*/true);
  const std::vector<KernelFlopsRecord> flops = sink_.flops();
  ASSERT_EQ(flops.size(), 1u);
  EXPECT_DOUBLE_EQ(flops[0].fp32, 15.0);
  ASSERT_EQ(flops[0].raw.size(), 3u);
  for (const auto& [metric, value] : flops[0].raw) {
    EXPECT_NE(metric, FakeCounterBackend::kTime);
    EXPECT_TRUE(std::isfinite(value));
  }
}

TEST_F(CounterCollectorTest, TheFullSetCountsTensorFlops) {
  Make("steps=0,set=full");
  collector_->OnStepBegin(0);
  Launch(7);
  collector_->OnStepEnd(0);
  collector_->Collect(/*final=*/true);
  std::vector<KernelFlopsRecord> flops = sink_.flops();
  ASSERT_EQ(flops.size(), 1u);
  ASSERT_EQ(flops[0].tensor.size(), 1u);
  EXPECT_EQ(flops[0].tensor[0].first, "fp16_dst_fp32");
  EXPECT_DOUBLE_EQ(flops[0].tensor[0].second, 7000.0);
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].passes, 6u);
  EXPECT_EQ(sink_.windows()[0].metric_set, "full");
}

// gpu-review D1: kernel replay must never re-run a collective (its peers wait for it).
TEST_F(CounterCollectorTest, ACollectiveIsKeptOutOfReplayAndTheOthersPair) {
  Make("steps=0");
  collector_->OnStepBegin(0);
  EXPECT_TRUE(Launch(1));
  EXPECT_FALSE(LaunchAllReduce(2));  // no ordinal, and the profiler is stopped while it runs
  EXPECT_FALSE(profiler_.started(kGpu));
  EXPECT_TRUE(Launch(3));  // the next pass starts after the collective's API exit
  EXPECT_TRUE(Launch(4));
  EXPECT_FALSE(LaunchAllReduce(5));
  collector_->OnStepEnd(0);
  Launch(6);
  collector_->Collect(false);

  std::map<uint64_t, KernelFlopsRecord> flops = FlopsById();
  ASSERT_EQ(flops.size(), 3u);
  for (uint64_t id : {1, 3, 4}) EXPECT_DOUBLE_EQ(flops[id].fp32, 5.0 * id) << id;
  ASSERT_EQ(sink_.windows().size(), 1u);
  const CounterWindowRecord& window = sink_.windows()[0];
  EXPECT_EQ(window.comm_kernels_excluded, 2u);
  EXPECT_EQ(window.kernels_counted, 3u);
  EXPECT_EQ(window.ranges_unmatched, 0u);
  EXPECT_EQ(window.status, "");
  EXPECT_EQ(sink_.unmatched(), 0u);
  // Paused, not disabled: one Enable for the window; each pass configured before its Start.
  EXPECT_EQ(profiler_.calls,
            (std::vector<std::string>{"enable 1", "initialize_image 1", "set_config 1", "start 1",
                                      "stop 1", "decode 1",  // before the all-reduce
                                      "initialize_image 1", "set_config 1", "start 1", "stop 1",
                                      "decode 1",  // before the second one
                                      "disable 1"}));
}

// What the H200 showed in the GPU acceptance of 2026-11-26: a torch step's pass had 10 more
// ranges than launches, as many as the memsets around it. The driver's own memset kernel makes a
// range that no launch callback announced; ending the pass at the memset keeps it out.
TEST_F(CounterCollectorTest, AMemsetEndsThePassSoItsOwnKernelMakesNoRange) {
  Make("steps=0");
  collector_->OnStepBegin(0);
  EXPECT_TRUE(Launch(1));
  EXPECT_TRUE(Launch(2));
  CUpti_CallbackData memset{};
  memset.callbackSite = CUPTI_API_ENTER;
  memset.correlationId = 3;
  memset.context = kGpu;
  EXPECT_TRUE(collector_->OnMemoryEnter(memset));  // counting: its activity is replay-slowed
  EXPECT_FALSE(profiler_.started(kGpu));
  profiler_.KernelRuns(kGpu, 3);  // the driver's memset kernel, while no pass runs
  EXPECT_FALSE(Launch(4));        // another thread, while the memset is still inside the driver
  Exit(memset);
  EXPECT_TRUE(Launch(5));  // the pass resumes after the memset's exit
  collector_->OnStepEnd(0);
  collector_->Collect(/*final=*/true);
  std::map<uint64_t, KernelFlopsRecord> flops = FlopsById();
  ASSERT_EQ(flops.size(), 3u);
  for (uint64_t id : {1, 2, 5}) EXPECT_DOUBLE_EQ(flops[id].fp32, 5.0 * id) << id;
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].kernels_counted, 3u);
  EXPECT_EQ(sink_.windows()[0].comm_kernels_excluded, 0u);
  EXPECT_EQ(sink_.windows()[0].ranges_unmatched, 1u);  // launch 4 only
}

// A closed window's profiler runs until the context's next launch; a memset before that launch
// ends its pass too, so the memset's own kernel is not taken for one of the window's launches.
TEST_F(CounterCollectorTest, AMemsetAfterTheWindowClosedStillEndsItsLastPass) {
  Make("steps=0");
  collector_->OnStepBegin(0);
  EXPECT_TRUE(Launch(1));
  EXPECT_TRUE(Launch(2));
  collector_->OnStepEnd(0);
  EXPECT_TRUE(profiler_.started(kGpu));  // stops at the next launch
  CUpti_CallbackData memset{};
  memset.callbackSite = CUPTI_API_ENTER;
  memset.correlationId = 3;
  memset.context = kGpu;
  collector_->OnMemoryEnter(memset);
  EXPECT_FALSE(profiler_.started(kGpu));
  profiler_.KernelRuns(kGpu, 3);
  Exit(memset);
  EXPECT_FALSE(Launch(4));  // disables the profiler; not counted
  collector_->Collect(/*final=*/true);
  EXPECT_EQ(FlopsById().size(), 2u);
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].kernels_counted, 2u);
  EXPECT_EQ(sink_.windows()[0].ranges_unmatched, 0u);
  EXPECT_EQ(sink_.windows()[0].status, "");
}

// Outside a window a memcpy or memset costs the collector nothing and changes nothing.
TEST_F(CounterCollectorTest, AMemsetOutsideAWindowLeavesTheProfilerAlone) {
  Make("steps=1");
  collector_->OnStepBegin(0);
  CUpti_CallbackData memset{};
  memset.callbackSite = CUPTI_API_ENTER;
  memset.correlationId = 1;
  memset.context = kGpu;
  EXPECT_FALSE(collector_->OnMemoryEnter(memset));
  Exit(memset);
  collector_->OnStepEnd(0);
  EXPECT_TRUE(profiler_.calls.empty());
  collector_->OnStepBegin(1);
  EXPECT_TRUE(Launch(2));
  collector_->OnStepEnd(1);
  collector_->Collect(/*final=*/true);
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].kernels_counted, 1u);
  EXPECT_EQ(sink_.windows()[0].status, "");
}

TEST_F(CounterCollectorTest, NoPassStartsWhileACollectiveIsInsideTheDriver) {
  Make("steps=0");
  collector_->OnStepBegin(0);
  EXPECT_TRUE(Launch(1));
  bool counted = true;
  const CUpti_CallbackData all_reduce = Enter(2, kAllReduce, &counted);  // thread A
  EXPECT_FALSE(counted);
  EXPECT_FALSE(Launch(3));  // thread B, while A's collective is still inside the driver
  EXPECT_FALSE(profiler_.started(kGpu));
  Exit(all_reduce);
  EXPECT_TRUE(Launch(4));
  collector_->OnStepEnd(0);
  collector_->Collect(/*final=*/true);
  std::map<uint64_t, KernelFlopsRecord> flops = FlopsById();
  ASSERT_EQ(flops.size(), 2u);
  EXPECT_DOUBLE_EQ(flops[1].fp32, 5.0);
  EXPECT_DOUBLE_EQ(flops[4].fp32, 20.0);
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].comm_kernels_excluded, 1u);
  EXPECT_EQ(sink_.windows()[0].ranges_unmatched, 1u);  // launch 3: in the window, not counted
  EXPECT_NE(sink_.windows()[0].status.find(
                "communication kernel or a memcpy/memset was inside the driver"),
            std::string::npos)
      << sink_.windows()[0].status;
}

TEST_F(CounterCollectorTest, AnotherThreadsProfilerSwitchIsWaitedForBeforeACollective) {
  Make("steps=0");
  std::thread other;
  bool comm_counted = true;
  CUpti_CallbackData all_reduce{};
  profiler_.during_start = [&] {
    // Thread A starts the profiler for launch 1; thread B's collective comes meanwhile and must
    // wait for the switch to end, then stop the pass before its kernel runs.
    other = std::thread([&] { all_reduce = Enter(2, kAllReduce, &comm_counted); });
  };
  collector_->OnStepBegin(0);
  bool counted = false;
  const CUpti_CallbackData first = Enter(1, kGemm, &counted);
  other.join();
  EXPECT_TRUE(counted);
  EXPECT_FALSE(comm_counted);
  EXPECT_FALSE(profiler_.started(kGpu));  // stopped before the collective ran
  profiler_.KernelRuns(kGpu, 1);
  Exit(first);
  Exit(all_reduce);
  EXPECT_TRUE(Launch(3));
  collector_->OnStepEnd(0);
  collector_->Collect(/*final=*/true);
  std::map<uint64_t, KernelFlopsRecord> flops = FlopsById();
  ASSERT_EQ(flops.size(), 1u);  // launch 1 was inside the driver when its pass ended: unpaired
  EXPECT_DOUBLE_EQ(flops[3].fp32, 15.0);
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].comm_kernels_excluded, 1u);
  EXPECT_EQ(sink_.windows()[0].status.find("a communication kernel could not"), std::string::npos)
      << sink_.windows()[0].status;
}

TEST_F(CounterCollectorTest, AMultiRankJobLeavesGraphsOutAndSaysSo) {
  Make(nullptr, 2048, /*world_size=*/4);
  const ControlAnswer answer = collector_->RequestWindow(1, "cheap", 1);
  EXPECT_TRUE(answer.accepted);
  EXPECT_NE(answer.message.find("communication kernels are left out"), std::string::npos);
  collector_->OnStepBegin(0);
  EXPECT_TRUE(Launch(1));
  // A graph may hold NCCL kernels, and its kernels are not known at launch.
  EXPECT_FALSE(Launch(2, {}, kGpu, /*graph=*/true, /*kernels=*/2));
  EXPECT_FALSE(Launch(3, {}, kGpu, false, 1, CUDA_SUCCESS, /*name=*/nullptr));
  EXPECT_TRUE(Launch(4));
  collector_->OnStepEnd(0);
  collector_->Collect(/*final=*/true);
  std::map<uint64_t, KernelFlopsRecord> flops = FlopsById();
  ASSERT_EQ(flops.size(), 2u);
  EXPECT_DOUBLE_EQ(flops[4].fp32, 20.0);
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].ranges_unmatched, 2u);
  EXPECT_NE(sink_.windows()[0].status.find("multi-rank job are not counted"), std::string::npos)
      << sink_.windows()[0].status;
}

TEST_F(CounterCollectorTest, AMultiRankJobThatCannotKeepACollectiveOutRefusesWindows) {
  Make("every=1", 2048, /*world_size=*/2);
  collector_->OnStepBegin(1);
  EXPECT_TRUE(Launch(1));
  profiler_.stop_result = CUPTI_ERROR_UNKNOWN;  // the pass cannot be ended before the kernel
  EXPECT_FALSE(LaunchAllReduce(2));
  profiler_.stop_result = CUPTI_SUCCESS;
  EXPECT_TRUE(profiler_.objects.empty());  // disabled at once instead
  EXPECT_FALSE(Launch(3));                 // not tried again in this window
  collector_->OnStepEnd(1);
  collector_->OnStepBegin(2);  // the environment's next window: refused, with a record
  EXPECT_FALSE(collector_->wants_launches());
  EXPECT_FALSE(Launch(4));
  collector_->OnStepEnd(2);
  collector_->Collect(false);
  const std::vector<CounterWindowRecord> windows = sink_.windows();
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_EQ(windows[0].status.find("a communication kernel could not be kept out of kernel "
                                   "replay (cuptiRangeProfilerStop failed"),
            0u)
      << windows[0].status;
  EXPECT_EQ(windows[1].first_step, 2);
  EXPECT_EQ(windows[1].status.find("no counter windows in this multi-rank job (WORLD_SIZE=2)"), 0u)
      << windows[1].status;
  const ControlAnswer refused = collector_->RequestWindow(1, "", 9);
  EXPECT_FALSE(refused.accepted);
  EXPECT_EQ(refused.message.find("no counter windows in this multi-rank job (WORLD_SIZE=2): a "
                                 "communication kernel could not be kept out"),
            0u)
      << refused.message;
}

TEST_F(CounterCollectorTest, ASingleProcessStillTakesWindowsAfterAnExclusionFailure) {
  Make("steps=0");
  collector_->OnStepBegin(0);
  EXPECT_TRUE(Launch(1));
  profiler_.stop_result = CUPTI_ERROR_UNKNOWN;
  EXPECT_FALSE(LaunchAllReduce(2));
  profiler_.stop_result = CUPTI_SUCCESS;
  collector_->OnStepEnd(0);
  collector_->Collect(false);
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_NE(sink_.windows()[0].status.find("could not be kept out"), std::string::npos);
  EXPECT_TRUE(collector_->RequestWindow(1, "", 9).accepted);  // no peers to hang
}

// gpu-review D7: a launch on a capturing stream runs nothing and makes no range.
TEST_F(CounterCollectorTest, ALaunchCapturedIntoAGraphGivesItsOrdinalBack) {
  Make("steps=0");
  collector_->OnStepBegin(0);
  EXPECT_TRUE(Launch(1));
  bool counted = false;
  const CUpti_CallbackData captured = Enter(2, kGemm, &counted);
  EXPECT_TRUE(counted);              // not known yet at its API enter
  collector_->OnGraphNodeCreated();  // CUPTI, inside the launch: it was captured
  Exit(captured);                    // and no kernel ran
  collector_->OnGraphNodeCreated();  // a node created outside any launch changes nothing
  EXPECT_TRUE(Launch(3));
  collector_->OnStepEnd(0);
  collector_->Collect(/*final=*/true);
  std::map<uint64_t, KernelFlopsRecord> flops = FlopsById();
  ASSERT_EQ(flops.size(), 2u);
  EXPECT_DOUBLE_EQ(flops[1].fp32, 5.0);
  EXPECT_DOUBLE_EQ(flops[3].fp32, 15.0);
  EXPECT_EQ(sink_.unmatched(), 0u);
  EXPECT_EQ(sink_.windows()[0].status, "");
}

// gpu-review D6: CUPTI may refuse a large image; the context retries once with half.
TEST_F(CounterCollectorTest, ARefusedImageSizeIsRetriedAtHalfAndThePassesFollow) {
  Make("steps=0", /*max_ranges=*/32);
  profiler_.refuse_ranges_above = 16;
  collector_->OnStepBegin(0);
  for (uint32_t id = 1; id <= 40; ++id) EXPECT_TRUE(Launch(id));
  collector_->OnStepEnd(0);
  Launch(41);
  collector_->Collect(false);
  EXPECT_EQ(profiler_.max_ranges, 16u);
  EXPECT_EQ(profiler_.max_ranges_per_pass, 16u);
  EXPECT_EQ(Calls("decode 1"), 3u);  // 16 + 16 + 8
  EXPECT_EQ(Calls("enable 1"), 1u);
  std::map<uint64_t, KernelFlopsRecord> flops = FlopsById();
  ASSERT_EQ(flops.size(), 40u);
  for (uint64_t id = 1; id <= 40; ++id) EXPECT_DOUBLE_EQ(flops[id].fp32, 5.0 * id) << id;
  EXPECT_EQ(sink_.windows()[0].status, "");
}

TEST_F(CounterCollectorTest, ASecondRefusalFailsTheWindowWithCuptisAnswer) {
  Make("steps=0", /*max_ranges=*/64);
  profiler_.refuse_ranges_above = 16;  // 64, then 32: both too many
  collector_->OnStepBegin(0);
  EXPECT_FALSE(Launch(1));
  collector_->OnStepEnd(0);
  collector_->Collect(false);
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_EQ(sink_.windows()[0].status.find("cuptiRangeProfilerSetConfig failed "
                                           "(CUPTI_ERROR_INVALID_OPERATION)"),
            0u)
      << sink_.windows()[0].status;
  EXPECT_TRUE(profiler_.objects.empty());
}

// gpu-review D11: at exit the exporter thread stops the profiler with its context pushed.
TEST_F(CounterCollectorTest, AtExitTheProfilerIsStoppedWithItsContextCurrent) {
  Make("steps=0:9");
  collector_->OnStepBegin(0);
  EXPECT_TRUE(Launch(1));
  collector_->Collect(/*final=*/true);
  EXPECT_EQ(std::vector<std::string>(profiler_.calls.begin() + 4, profiler_.calls.end()),
            (std::vector<std::string>{"push 1", "stop 1", "decode 1", "disable 1", "pop 1"}));
  EXPECT_TRUE(profiler_.current.empty());
  EXPECT_EQ(FlopsById().size(), 1u);
}

// gpu-review D13: partial data after Stop is a failed pass, not counters.
TEST_F(CounterCollectorTest, APassWithUnsubmittedReplaysIsNotEvaluated) {
  Make("steps=0");
  profiler_.all_pass_submitted = false;
  collector_->OnStepBegin(0);
  EXPECT_TRUE(Launch(1));
  collector_->OnStepEnd(0);
  Launch(2);
  collector_->Collect(false);
  EXPECT_TRUE(sink_.flops().empty());
  ASSERT_EQ(sink_.windows().size(), 1u);
  EXPECT_NE(sink_.windows()[0].status.find("not every kernel-replay pass was submitted"),
            std::string::npos)
      << sink_.windows()[0].status;
}

// A profiler CUPTI would not disable may stay on the context (the H200's torch job lost every
// kernel record after its window, cause unknown): said on stderr once, the window's FLOPs kept.
TEST_F(CounterCollectorTest, AProfilerThatWouldNotDisableIsSaidOnceAndTheWindowStands) {
  Make("every=1");
  profiler_.disable_result = CUPTI_ERROR_INVALID_CONTEXT;
  ::testing::internal::CaptureStderr();
  collector_->OnStepBegin(1);
  Launch(1);
  Launch(2);
  collector_->OnStepEnd(1);
  Step(2, {3});  // window 1 is over: this launch disables its profiler, then window 2 starts
  Step(3, {4});
  collector_->Collect(/*final=*/true);
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string said =
      "flopscope: counter windows: the range profiler could not be disabled: "
      "cuptiRangeProfilerDisable failed (";
  ASSERT_NE(err.find(said), std::string::npos) << err;
  EXPECT_NE(err.find("kernels launched later on this context may be slowed or come untimed\n"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find(said, err.find(said) + 1), std::string::npos) << err;  // said once
  EXPECT_EQ(Calls("disable 1"), 3u);  // at the end of each of the three windows
  EXPECT_EQ(FlopsById().size(), 4u);  // every window's passes were decoded and evaluated
  ASSERT_EQ(sink_.windows().size(), 3u);
  for (const CounterWindowRecord& window : sink_.windows()) EXPECT_EQ(window.status, "");
}

// gpu-review D14: the first pass that does not pair is described on stderr, once.
TEST_F(CounterCollectorTest, TheFirstUnpairedPassIsDescribedOnceOnStderr) {
  Make("every=1");
  collector_->OnStepBegin(1);
  Launch(1);
  profiler_.KernelRuns(kGpu, 999);  // a kernel the launch callbacks never saw
  Launch(2);
  collector_->OnStepEnd(1);
  Step(2, {3});
  profiler_.KernelRuns(kGpu, 998);
  Step(3, {4});
  ::testing::internal::CaptureStderr();
  collector_->Collect(/*final=*/true);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("flopscope: first counter pass that did not pair: 2 launches, 3 ranges "
                     "(0,1,2), 0 dropped: 3 counter ranges for 2 launches\n"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("first counter pass", err.find("first counter pass") + 1), std::string::npos)
      << err;  // window 3 did not pair either: not described again
  EXPECT_EQ(sink_.windows().size(), 3u);
}

}  // namespace
}  // namespace flopscope::injector::cupti
