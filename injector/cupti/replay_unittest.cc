// Replays GPU recordings (tests/data/gpu/README.md): the raw activity buffers go through the REAL
// cuptiActivityGetNextRecord, the parser and the joiner; counter data images through the range
// profiler's image readers and the Profiler Host API (neither needs a GPU). Every recording
// committed under tests/data/gpu/ is replayed; a round trip through the recorder with hand-built
// buffers proves the format on machines that have none.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "counters/counter_evaluator.h"
#include "counters/cupti_library.h"
#include "counters/kernel_flop_values.h"
#include "counters/profiler_host_api.h"
#include "injector/cupti/activity_parser.h"
#include "injector/cupti/counter_windows/host_api_counter_backend.h"
#include "injector/cupti/counter_windows/pass_evaluator.h"
#include "injector/cupti/counter_windows/range_profiler_api.h"
#include "injector/cupti/graph_node_table.h"
#include "injector/cupti/kernel_joiner.h"
#include "injector/cupti/kernel_tracer.h"
#include "injector/cupti/launch_ring.h"
#include "injector/cupti/recorder.h"
#include "injector/cupti/testing/activity_buffer_builder.h"
#include "injector/cupti/testing/fake_cupti.h"
#include "injector/cupti/testing/recording_reader.h"
#include "injector/cupti/testing/recording_sink.h"

namespace flopscope::injector::cupti {
namespace {

namespace fs = std::filesystem;
using testing::ActivityBufferBuilder;
using testing::FakeCupti;
using testing::LoadRecording;
using testing::Recording;
using testing::RecordingSink;

// What the parser and the joiner make of a recording's buffers, with the recorded attribution
// standing in for the launch callbacks.
struct Replay {
  std::vector<KernelRecord> records;
  std::vector<std::string> names;  // by name_id - 1
  uint64_t kernels = 0;
  uint64_t untimed = 0;
  uint64_t truncated_buffers = 0;
  std::vector<DeviceFacts> devices;
  KernelJoiner::Counters joined;
};

Replay ReplayActivity(Recording* recording) {
  Replay replay;
  LaunchRing ring(1u << 20);
  GraphNodeTable nodes;
  for (const Recorder::AttributionEntry& entry : recording->attribution) {
    const RangeContext context{entry.path_id, entry.range_instance_id};
    // A graph kernel the live joiner attributed through its node has instance 0 (the node's
    // range, not one instance of it); every other record came through its launch.
    if (entry.graph_node_id != 0 && entry.range_instance_id == 0 && entry.path_id != 0) {
      nodes.NodeCreated(entry.graph_node_id, context);
    } else {
      ring.Record(static_cast<uint32_t>(entry.correlation_id), context, entry.counted != 0);
    }
  }
  KernelJoiner joiner(&ring, &nodes);
  std::map<std::string, uint32_t> ids;
  for (Recording::Buffer& buffer : recording->buffers) {
    ParsedBuffer parsed;
    ParseActivityBuffer(&::cuptiActivityGetNextRecord, buffer.data(), buffer.size, &parsed);
    for (size_t i = 0; i < parsed.records.size(); ++i) {
      if (parsed.names[i] == nullptr) continue;
      ++replay.kernels;
      auto [it, added] = ids.emplace(parsed.names[i], static_cast<uint32_t>(ids.size() + 1));
      if (added) replay.names.push_back(it->first);
      parsed.records[i].name_id = it->second;
    }
    replay.untimed += parsed.untimed;
    replay.truncated_buffers += parsed.truncated ? 1 : 0;
    replay.devices.insert(replay.devices.end(), parsed.devices.begin(), parsed.devices.end());
    joiner.Join(&parsed.records, &replay.records);
  }
  joiner.Age(/*final=*/true, &replay.records);
  replay.joined = joiner.counters();
  return replay;
}

using AttributionKey = std::tuple<uint64_t, uint64_t, uint32_t, uint64_t, uint64_t>;

std::vector<AttributionKey> Keys(const std::vector<KernelRecord>& records) {
  std::vector<AttributionKey> keys;
  for (const KernelRecord& r : records) {
    keys.emplace_back(r.correlation_id, r.graph_node_id, r.kind, r.path_id, r.range_instance_id);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::vector<AttributionKey> Keys(const std::vector<Recorder::AttributionEntry>& entries) {
  std::vector<AttributionKey> keys;
  for (const Recorder::AttributionEntry& e : entries) {
    keys.emplace_back(e.correlation_id, e.graph_node_id, e.kind, e.path_id, e.range_instance_id);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

// The invariants every recording must keep, real or hand-built.
void ExpectActivityInvariants(const Recording& recording, const Replay& replay) {
  EXPECT_EQ(replay.truncated_buffers, 0u) << "a buffer ends inside a record";
  // Every kernel record parsed: as many as the live run attributed and sent.
  uint64_t recorded_kernels = 0;
  for (const Recorder::AttributionEntry& e : recording.attribution) {
    recorded_kernels += e.kind == kActivityKernel ? 1 : 0;
  }
  if (!recording.truncated) {
    EXPECT_EQ(replay.kernels, recorded_kernels);
  }
  for (const KernelRecord& r : replay.records) {
    EXPECT_GT(r.start_ns, 0) << "correlation " << r.correlation_id;
    EXPECT_LE(r.start_ns, r.end_ns) << "correlation " << r.correlation_id;
    if (r.kind == kActivityKernel) {
      ASSERT_GT(r.name_id, 0u);
      EXPECT_FALSE(replay.names[r.name_id - 1].empty());
    }
  }
  // Each kernel attributed, and to the range the live run chose.
  EXPECT_EQ(replay.joined.launch_not_seen, 0u);
  if (!recording.truncated) {
    EXPECT_EQ(Keys(replay.records), Keys(recording.attribution));
  }
}

// Evaluates each recorded counter pass through the Profiler Host API, which needs no driver
// (the range profiler's GetCounterDataInfo, which PassEvaluator reads range names with, does:
// CUPTI_ERROR_NOT_INITIALIZED here). Recordings come from acceptance.sh's flop_workload run,
// whose kernels each do exactly 2^31 FLOPs (flop_workload.cu: an FFMA loop and four 1024^3
// GEMMs), so range i, launch i's counters, must come to 2^31 FLOPs within 1%.
void ExpectCounterInvariants(const Recording& recording) {
  if (recording.counter_passes.empty()) return;
  counters::CuptiLibrary library;
  counters::ProfilerHostApi host;
  std::string error;
  ASSERT_TRUE(counters::LoadProfilerHostApi("", &host, &library, &error)) << error;
  constexpr double kKernelFlops = 2147483648.0;
  for (const FlushedPass& pass : recording.counter_passes) {
    if (!pass.error.empty()) continue;  // the live run had no image for this pass either
    counters::CounterEvaluator evaluator;
    const std::vector<uint8_t>& availability = pass.plan->availability;
    ASSERT_TRUE(evaluator.Init(host, pass.plan->chip, pass.plan->metrics,
                               availability.empty() ? nullptr : availability.data(),
                               availability.size(), &error))
        << error;
    ASSERT_FALSE(pass.launches.entries.empty());
    for (size_t range = 0; range < pass.launches.entries.size(); ++range) {
      std::vector<double> values;
      ASSERT_TRUE(evaluator.Evaluate(pass.data.image.data(), pass.data.image.size(), range, &values,
                                     &error))
          << error;
      const counters::KernelFlopValues flops =
          counters::FlopsFromCounters(pass.plan->metrics, values);
      EXPECT_NEAR(flops.total(), kKernelFlops, kKernelFlops * 0.01)
          << recording.dir << " range " << range;
    }
  }
}

class RecorderRoundTripTest : public ::testing::Test {
 protected:
  RecorderRoundTripTest() {
    char pattern[] = "/tmp/flopscope_recording_XXXXXX";
    dir_ = mkdtemp(pattern);
    fake_.callback_names = {{{CUPTI_CB_DOMAIN_DRIVER_API, 307}, "cuLaunchKernel"},
                            {{CUPTI_CB_DOMAIN_DRIVER_API, 514}, "cuGraphLaunch"}};
  }
  ~RecorderRoundTripTest() override {
    RecordingSink::SetThreadContext(RangeContext{});
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  void Launch(RangeContext context, uint32_t correlation_id) {
    RecordingSink::SetThreadContext(context);
    CUpti_CallbackData data{};
    data.callbackSite = CUPTI_API_ENTER;
    data.correlationId = correlation_id;
    fake_.callback(fake_.userdata, CUPTI_CB_DOMAIN_DRIVER_API, 307, &data);
    RecordingSink::SetThreadContext(RangeContext{});
  }

  static void Deliver(ActivityBufferBuilder& builder) {
    uint8_t* buffer = nullptr;
    size_t size = 0, max_records = 0;
    KernelTracer::OnBufferRequested(&buffer, &size, &max_records);
    ASSERT_NE(buffer, nullptr);
    const size_t valid = builder.CopyTo(buffer);
    KernelTracer::OnBufferCompleted(nullptr, 0, buffer, size, valid);
  }

  std::string dir_;
  FakeCupti fake_;
  RecordingSink sink_;
};

constexpr int64_t kEpochNs = 1764000000ll * 1000000000ll;  // late 2025, CLOCK_REALTIME

ActivityBufferBuilder::Kernel KernelAt(uint32_t correlation_id, const char* name, int64_t at) {
  ActivityBufferBuilder::Kernel kernel;
  kernel.correlation_id = correlation_id;
  kernel.name = name;
  kernel.start = static_cast<uint64_t>(kEpochNs + at);
  kernel.end = kernel.start + 1500;
  kernel.grid[0] = 132;
  kernel.block[0] = 256;
  return kernel;
}

TEST_F(RecorderRoundTripTest, HandBuiltBuffersReplayToWhatTheLiveRunReported) {
  TracerOptions options;
  options.record_dir = dir_;
  KernelTracer tracer(&sink_, options, fake_.Api(), 1024);
  ASSERT_TRUE(tracer.Attach().tracing);
  ASSERT_NE(ActiveRecorder(), nullptr);
  int context = 0;
  fake_.context_devices = {{&context, 0}};
  fake_.chips = {{0, "GH100"}};
  CUpti_ResourceData created{};
  created.context = reinterpret_cast<CUcontext>(&context);
  fake_.callback(fake_.userdata, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED,
                 &created);

  Launch(RangeContext{10, 100}, 1);
  Launch(RangeContext{11, 110}, 2);
  Launch(RangeContext{10, 101}, 3);  // its kernel arrives in the second buffer
  ActivityBufferBuilder first;
  ActivityBufferBuilder::Device device;
  device.name = "NVIDIA H100 80GB HBM3";
  device.sm_count = 132;
  device.major = 9;
  ActivityBufferBuilder::Memory copy;
  copy.correlation_id = 2;
  copy.start = static_cast<uint64_t>(kEpochNs + 50);
  copy.end = copy.start + 700;
  copy.bytes = 1 << 20;
  first.AddDevice(device).AddKernel(KernelAt(1, "_Z4gemmPf", 0)).AddMemcpy(copy);
  first.AddKernel(KernelAt(2, "_Z7softmaxPf", 2000)).AddDriverApi(2, 307);
  Deliver(first);
  tracer.Collect(false);
  ActivityBufferBuilder second;
  second.AddKernel(KernelAt(3, "_Z4gemmPf", 4000));
  Deliver(second);
  tracer.FinishAtExit();
  tracer.Collect(/*final=*/true);
  const std::vector<KernelRecord> live = sink_.records();
  ASSERT_EQ(live.size(), 4u);

  Recording recording;
  std::string error;
  ASSERT_TRUE(LoadRecording(dir_, &::cuptiActivityGetNextRecord, &recording, &error)) << error;
  EXPECT_EQ(recording.format_version, Recorder::kFormatVersion);
  EXPECT_EQ(recording.cupti_version, static_cast<uint32_t>(CUPTI_API_VERSION));
  EXPECT_EQ(recording.chips, (std::map<uint32_t, std::string>{{0, "GH100"}}));
  EXPECT_EQ(recording.devices, 1u);
  ASSERT_EQ(recording.buffers.size(), 2u);
  const Replay replay = ReplayActivity(&recording);
  ExpectActivityInvariants(recording, replay);
  ASSERT_EQ(replay.devices.size(), 1u);
  EXPECT_EQ(replay.devices[0].name, "NVIDIA H100 80GB HBM3");

  // Field for field what the live run reported, names included.
  auto by_start = [](const KernelRecord& a, const KernelRecord& b) {
    return a.start_ns < b.start_ns;
  };
  std::vector<KernelRecord> replayed = replay.records;
  std::vector<KernelRecord> reported = live;
  std::sort(replayed.begin(), replayed.end(), by_start);
  std::sort(reported.begin(), reported.end(), by_start);
  ASSERT_EQ(replayed.size(), reported.size());
  for (size_t i = 0; i < reported.size(); ++i) {
    const KernelRecord& r = replayed[i];
    const KernelRecord& l = reported[i];
    EXPECT_EQ(std::tie(r.correlation_id, r.path_id, r.range_instance_id, r.kind, r.start_ns,
                       r.end_ns, r.bytes, r.grid_x, r.block_x),
              std::tie(l.correlation_id, l.path_id, l.range_instance_id, l.kind, l.start_ns,
                       l.end_ns, l.bytes, l.grid_x, l.block_x));
    const std::string replayed_name = r.name_id == 0 ? "" : replay.names[r.name_id - 1];
    const std::string reported_name = l.name_id == 0 ? "" : sink_.NameOf(l.name_id);
    EXPECT_EQ(replayed_name, reported_name);
  }

  // Committed under tests/data/gpu/<name>/, it is found there (the README is not a recording).
  const fs::path root = fs::path(dir_) / "src" / "tests" / "data" / "gpu";
  fs::create_directories(root / "handbuilt");
  for (const fs::directory_entry& file : fs::directory_iterator(dir_)) {
    if (file.is_regular_file())
      fs::copy_file(file.path(), root / "handbuilt" / file.path().filename());
  }
  std::ofstream(root / "README.md") << "not a recording\n";
  EXPECT_EQ(testing::FindRecordings(root.string()),
            std::vector<std::string>{(root / "handbuilt").string()});
}

TEST_F(RecorderRoundTripTest, CounterPassesKeepTheirImagesPlansAndLaunches) {
  std::string error;
  std::unique_ptr<Recorder> recorder = Recorder::Open(dir_, &::cuptiActivityGetNextRecord, &error);
  ASSERT_NE(recorder, nullptr) << error;
  auto plan = std::make_shared<CounterPlan>();
  plan->chip = "GH100";
  plan->passes = 2;
  plan->metrics = {"sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "gpu__time_duration.sum"};
  plan->config_image = {1, 2, 3, 4};
  plan->availability = {9, 8};
  FlushedPass pass;
  pass.window_id = 7;
  pass.plan = plan;
  // Not a real image (none can be made without a GPU): the bytes must come back unchanged.
  for (int i = 0; i < 4096; ++i) pass.data.image.push_back(static_cast<uint8_t>(i * 7));
  pass.data.dropped = 1;
  LaunchEntry launch;
  launch.mark.correlation_id = 42;
  launch.mark.path_id = 5;
  launch.mark.instance_id = 6;
  launch.mark.step = 3;
  launch.graph = true;
  pass.launches.entries = {launch, launch};
  pass.launches.entries[1].mark.correlation_id = 43;
  pass.launches.taint = "a \"quoted\" reason";
  recorder->RecordPass(pass);
  FlushedPass second = pass;
  second.window_id = 8;
  recorder->RecordPass(second);  // same plan: its config is written once

  Recording recording;
  ASSERT_TRUE(LoadRecording(dir_, &::cuptiActivityGetNextRecord, &recording, &error)) << error;
  ASSERT_EQ(recording.counter_passes.size(), 2u);
  const FlushedPass& back = recording.counter_passes[0];
  EXPECT_EQ(back.window_id, 7u);
  EXPECT_EQ(recording.counter_passes[1].window_id, 8u);
  EXPECT_EQ(back.plan->chip, "GH100");
  EXPECT_EQ(back.plan->metrics, plan->metrics);
  EXPECT_EQ(back.plan->passes, 2u);
  EXPECT_EQ(back.plan->config_image, plan->config_image);
  EXPECT_EQ(back.plan->availability, plan->availability);
  EXPECT_EQ(back.data.image, pass.data.image);
  EXPECT_EQ(back.data.dropped, 1u);
  EXPECT_EQ(back.launches.taint, pass.launches.taint);
  ASSERT_EQ(back.launches.entries.size(), 2u);
  EXPECT_EQ(back.launches.entries[1].mark.correlation_id, 43u);
  EXPECT_EQ(back.launches.entries[0].mark.step, 3);
  EXPECT_TRUE(back.launches.entries[0].graph);
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "config-0001.bin"));
}

TEST_F(RecorderRoundTripTest, ARecordingStopsAtItsCapAndSaysSo) {
  ActivityBufferBuilder builder;
  for (uint32_t id = 1; id <= 4; ++id) builder.AddKernel(KernelAt(id, "_Z1kv", id * 2000));
  // Room for one buffer and its names file (one name: 12 bytes of header and 5 of text).
  const uint64_t cap = builder.size() + 64;
  std::string error;
  std::unique_ptr<Recorder> recorder =
      Recorder::Open(dir_, &::cuptiActivityGetNextRecord, &error, cap);
  ASSERT_NE(recorder, nullptr) << error;
  recorder->RecordActivityBuffer(builder.data(), builder.size());
  recorder->RecordActivityBuffer(builder.data(), builder.size());  // over the cap: not kept
  Recording recording;
  ASSERT_TRUE(LoadRecording(dir_, &::cuptiActivityGetNextRecord, &recording, &error)) << error;
  EXPECT_TRUE(recording.truncated);
  ASSERT_EQ(recording.buffers.size(), 1u);
  EXPECT_EQ(recording.buffers[0].size, builder.size());
}

// The GPU acceptance of 2026-11-26 (H200): libnvperf_host tears its state down in an exit handler
// registered at the Host API's first use, after the tracer's. The backend calls back after every
// plan and evaluator it makes, refused ones too, so the session can register its handler again.
TEST(HostApiCounterBackendTest, CallsBackAfterEveryUseOfTheHostApi) {
  counters::CuptiLibrary library;
  counters::ProfilerHostApi host;
  std::string error;
  ASSERT_TRUE(counters::LoadProfilerHostApi("", &host, &library, &error)) << error;
  int uses = 0;
  std::unique_ptr<CounterBackend> backend = MakeHostApiCounterBackend(host, [&] { ++uses; });
  CounterPlan plan;
  ASSERT_TRUE(backend->Plan("GH100", counters::MetricSetKind::kCheap, {}, &plan, &error)) << error;
  EXPECT_EQ(uses, 1);
  EXPECT_NE(backend->MakeEvaluator(plan, &error), nullptr) << error;
  EXPECT_EQ(uses, 2);
  CounterPlan refused;
  EXPECT_FALSE(backend->Plan("XY999", counters::MetricSetKind::kCheap, {}, &refused, &error));
  EXPECT_EQ(uses, 3);
}

TEST(RecorderTest, AnUnwritableDirectoryIsRefusedWithTheReason) {
  std::string error;
  EXPECT_EQ(Recorder::Open("/nonexistent-parent/recording", &::cuptiActivityGetNextRecord, &error),
            nullptr);
  EXPECT_NE(error.find("/nonexistent-parent/recording"), std::string::npos) << error;
}

TEST(RecordingReplayTest, EveryCommittedGpuRecordingReplays) {
  const char* source = std::getenv("FLOPSCOPE_SOURCE_DIR");
  if (source == nullptr) GTEST_SKIP() << "FLOPSCOPE_SOURCE_DIR is not set (run through ctest)";
  const std::string root = std::string(source) + "/tests/data/gpu";
  const std::vector<std::string> recordings = testing::FindRecordings(root);
  if (recordings.empty()) {
    GTEST_SKIP() << "no GPU recording under " << root
                 << " yet: record one on a GPU with FLOPSCOPE_RECORD_DIR (see its README.md)";
  }
  for (const std::string& dir : recordings) {
    SCOPED_TRACE(dir);
    Recording recording;
    std::string error;
    ASSERT_TRUE(LoadRecording(dir, &::cuptiActivityGetNextRecord, &recording, &error)) << error;
    EXPECT_EQ(recording.format_version, Recorder::kFormatVersion);
    const Replay replay = ReplayActivity(&recording);
    EXPECT_GT(replay.kernels, 0u);
    ExpectActivityInvariants(recording, replay);
    ExpectCounterInvariants(recording);
  }
}

}  // namespace
}  // namespace flopscope::injector::cupti
