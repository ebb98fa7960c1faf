// A counter window through a real session (its own process: the session is a singleton): steps
// pushed in the `flopscope` NVTX domain open and close the window, launches go through the
// tracer's callbacks to a scripted range profiler, and the exporter's batches (the debug dump)
// carry the KernelFlops, the window's record and the counted flags of its ranges and kernels.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <map>
#include <string>

#include "injector/cupti/counter_windows/testing/fake_counter_backend.h"
#include "injector/cupti/counter_windows/testing/fake_range_profiler.h"
#include "injector/cupti/kernel_tracer.h"
#include "injector/cupti/testing/activity_buffer_builder.h"
#include "injector/cupti/testing/fake_cupti.h"
#include "injector/export/testing/dump_reader.h"
#include "injector/kernel_api_sink.h"
#include "injector/session.h"

namespace flopscope::injector::cupti {
namespace {

using injector::testing::Dump;
using injector::testing::ReadDump;
using testing::ActivityBufferBuilder;
using testing::FakeCounterBackend;
using testing::FakeCupti;
using testing::FakeRangeProfiler;

constexpr uint32_t kLaunchKernel = 307;
constexpr uint32_t kCounterUnmatched = 10;

TEST(SessionCountersTest, AWindowReachesTheDaemonWithFlopsAWindowRecordAndCountedFlags) {
  const std::string dump_file =
      ::testing::TempDir() + "session-counters-" + std::to_string(getpid()) + ".dump";
  setenv("FLOPSCOPE_DEBUG_DUMP", dump_file.c_str(), 1);
  setenv("FLOPSCOPE_KERNELS", "0", 1);  // the session's own tracer would look for a driver
  Session* session = Session::StartOnce();
  ASSERT_NE(session, nullptr);

  int gpu = 0;
  const CUcontext context = reinterpret_cast<CUcontext>(&gpu);
  FakeCupti fake;
  fake.callback_names = {{{CUPTI_CB_DOMAIN_DRIVER_API, kLaunchKernel}, "cuLaunchKernel"}};
  fake.context_devices = {{&gpu, 0}};
  fake.chips = {{0, "GH100"}};
  FakeRangeProfiler profiler;
  KernelApiSink sink;
  CounterSettings settings;
  settings.metric_set = counters::MetricSetKind::kCheap;  // the fake scripts the cheap set
  std::string error;
  ASSERT_TRUE(ParseCounterWindows("steps=1", &settings, &error)) << error;
  TracerOptions options;
  options.buffer_cap_bytes = 8u << 20;
  KernelTracer tracer(&sink, options, fake.Api(), 64,
                      std::make_unique<CounterCollector>(&sink, settings, profiler.Api(),
                                                         std::make_unique<FakeCounterBackend>()));
  ASSERT_TRUE(tracer.Attach().tracing);
  // What the session does for its own tracer: steps drive the tracer's windows.
  session->steps().SetListener(tracer.counter_windows());
  CUpti_ResourceData created{};
  created.context = context;
  fake.callback(fake.userdata, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED,
                &created);

  const Domain* flopscope = session->domains().Create("flopscope");
  const Domain* modules = session->domains().Default();
  RangeTracker& tracker = session->tracker();
  for (uint32_t step = 0; step < 3; ++step) {
    tracker.Push(flopscope, "step");
    tracker.Push(flopscope, "forward");
    tracker.Push(modules, "layer");
    CUpti_CallbackData launch{};
    launch.callbackSite = CUPTI_API_ENTER;
    launch.correlationId = step + 1;
    launch.context = context;
    launch.symbolName = "_Z5layerv";
    KernelTracer::OnCallback(fake.userdata, CUPTI_CB_DOMAIN_DRIVER_API, kLaunchKernel, &launch);
    profiler.KernelRuns(context, launch.correlationId);
    CUresult returned = CUDA_SUCCESS;
    launch.callbackSite = CUPTI_API_EXIT;
    launch.functionReturnValue = &returned;
    KernelTracer::OnCallback(fake.userdata, CUPTI_CB_DOMAIN_DRIVER_API, kLaunchKernel, &launch);
    tracker.Pop(modules);
    tracker.Pop(flopscope);
    tracker.Pop(flopscope);
  }
  ActivityBufferBuilder records;
  for (uint32_t id = 1; id <= 3; ++id) {
    ActivityBufferBuilder::Kernel kernel;
    kernel.correlation_id = id;
    kernel.name = "_Z5layerv";
    kernel.start = 1'700'000'000'000'000'000ull + id * 1000;
    kernel.end = kernel.start + 500;
    records.AddKernel(kernel);
  }
  uint8_t* buffer = nullptr;
  size_t size = 0, max_records = 0;
  KernelTracer::OnBufferRequested(&buffer, &size, &max_records);
  ASSERT_NE(buffer, nullptr);
  KernelTracer::OnBufferCompleted(nullptr, 0, buffer, size, records.CopyTo(buffer));
  tracer.Collect(false);
  session->exporter()->Stop();

  const Dump dump = ReadDump(dump_file);
  ASSERT_TRUE(dump.problems.empty()) << dump.problems[0];
  // Ranges: only step 1's (the window's) are counted, the step range itself included.
  for (const char* path : {"layer", "step", "step/forward"}) {
    const std::vector<Dump::Range> ranges = dump.RangesAt(path);
    ASSERT_EQ(ranges.size(), 3u) << path;
    EXPECT_FALSE(ranges[0].counted) << path;
    EXPECT_TRUE(ranges[1].counted) << path;
    EXPECT_FALSE(ranges[2].counted) << path;
  }
  std::map<uint64_t, bool> counted;
  for (const Dump::Kernel& kernel : dump.kernels) counted[kernel.correlation_id] = kernel.counted;
  EXPECT_EQ(counted, (std::map<uint64_t, bool>{{1, false}, {2, true}, {3, false}}));

  ASSERT_EQ(dump.flops.size(), 1u);
  const Dump::Flops& flops = dump.flops[0];
  EXPECT_EQ(flops.correlation_id, 2u);
  EXPECT_EQ(dump.PathOf(flops.path_id), "layer");
  EXPECT_EQ(flops.range_instance_id, dump.RangesAt("layer")[1].instance_id);
  EXPECT_EQ(dump.PathOf(flops.phase_path_id), "step/forward");
  EXPECT_EQ(flops.counted_step, 1);
  EXPECT_EQ(dump.strings.at(flops.name_id), "_Z5layerv");
  EXPECT_DOUBLE_EQ(flops.fp32, 10.0);  // tag 2: fp32 = 5t
  EXPECT_DOUBLE_EQ(flops.fp64, 12.0);

  ASSERT_EQ(dump.windows.size(), 1u);
  const Dump::Window& window = dump.windows[0];
  EXPECT_EQ(window.first_step, 1);
  EXPECT_EQ(window.last_step, 1);
  EXPECT_EQ(window.trigger, "env: steps=1");
  EXPECT_EQ(window.metric_set, "cheap");
  EXPECT_EQ(window.chip, "GH100");
  EXPECT_EQ(window.passes, 2u);
  EXPECT_EQ(window.kernels_counted, 1u);
  EXPECT_EQ(window.ranges_unmatched, 0u);
  EXPECT_EQ(window.status, "");
  EXPECT_GT(window.end_ns, 1'600'000'000'000'000'000);  // CLOCK_REALTIME ns
  EXPECT_EQ(dump.Loss(kCounterUnmatched), 0u);
  unlink(dump_file.c_str());
}

}  // namespace
}  // namespace flopscope::injector::cupti
