#include "importer/import_assembler.h"

#include <gtest/gtest.h>

#include <map>

#include "importer/time_base.h"

namespace flopscope::importer {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'750'000'000);

// Thread 1 runs Model_0 [0, 100] holding Linear_0 [10, 40]; step 3 spans everything.
TraceRecording SmallRecording() {
  TraceRecording recording;
  recording.path = "small.json";
  recording.content_digest = 0x1234;
  const auto range = [&recording](int64_t start, int64_t end, const char* name,
                                  RangeOrigin origin) {
    RawRange r;
    r.thread = 1;
    r.start_ns = start;
    r.end_ns = end;
    r.name = recording.strings.Intern(name);
    r.origin = origin;
    recording.ranges.push_back(r);
  };
  range(0, 1000, "ProfilerStep#3", RangeOrigin::kAnnotation);
  range(0, 100, "Model_0", RangeOrigin::kPythonModule);
  range(10, 40, "Linear_0", RangeOrigin::kPythonModule);
  recording.launches[1] = {1, 20, true};       // inside Linear_0
  recording.launches[2] = {1, 60, true};       // inside Model_0 only
  recording.launches[3] = {1, 500, true};      // no module open
  for (uint64_t correlation : {1, 2, 3, 4}) {  // 4 has no launch
    GpuActivity kernel;
    kernel.correlation_id = correlation;
    kernel.name = recording.strings.Intern("k");
    kernel.device = 1;
    kernel.start_ns = 200;
    kernel.end_ns = 210;
    recording.activities.push_back(kernel);
  }
  for (uint32_t index : {0u, 1u}) recording.devices.emplace_back().set_index(index);
  CounterSample sample;
  sample.name = recording.strings.Intern("k");
  sample.counters = {
      {recording.strings.Intern("sm__sass_thread_inst_executed_op_dfma_pred_on.sum"), 3}};
  for (int i = 0; i < 4; ++i) recording.counter_samples.push_back(sample);
  return recording;
}

std::string Metadata(const ImportPlan& plan, const std::string& key) {
  for (const v1::Metadata& entry : plan.metadata) {
    if (entry.key() == key) return entry.value();
  }
  return "<absent>";
}

TEST(ImportAssemblerTest, AttributesKernelsToTheInnermostModuleAtLaunch) {
  absl::StatusOr<ImportPlan> plan = ImportAssembler::Assemble(SmallRecording(), {"j", 0, kNow});
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::string> paths;
  for (const Attribution& a : plan->attributions) {
    paths.push_back(a.path_id == 0 ? "" : plan->paths[a.path_id - 1].name());
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"Linear_0", "Model_0", "", ""}));
  EXPECT_EQ(plan->counts.attributed_kernels, 2u);
  EXPECT_EQ(plan->counts.kernels_without_launch, 1u);
  EXPECT_EQ(Metadata(*plan, "import.unattributed_kernels"), "2");
  EXPECT_EQ(Metadata(*plan, "import.kernels_without_launch"), "1");
}

TEST(ImportAssemblerTest, CountersBecomeFlopsWithTheirStep) {
  absl::StatusOr<ImportPlan> plan = ImportAssembler::Assemble(SmallRecording(), {"j", 0, kNow});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->flops.size(), 4u);
  EXPECT_DOUBLE_EQ(plan->flops.at(0).fp64(), 6);
  EXPECT_EQ(plan->counted_context.at(0).step, 3);
  EXPECT_EQ(plan->counted_context.size(), 3u) << "kernel 4 has no launch, hence no step";
  EXPECT_NE(Metadata(*plan, "import.fp16_convention"), "<absent>");
}

TEST(ImportAssemblerTest, CountedKernelsKnowTheInnermostPhaseAtLaunch) {
  TraceRecording recording = SmallRecording();
  RawRange forward;
  forward.thread = 1;
  forward.start_ns = 5;
  forward.end_ns = 50;
  forward.name = recording.strings.Intern("## forward ##");
  forward.origin = RangeOrigin::kAnnotation;
  recording.ranges.push_back(forward);
  absl::StatusOr<ImportPlan> plan = ImportAssembler::Assemble(std::move(recording), {"j", 0, kNow});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const auto name_of = [&](uint64_t id) {
    return id == 0 ? std::string("<none>") : plan->paths[id - 1].name();
  };
  // Launch 1 (t=20) is inside forward, inside step 3; launches 2 and 3 only inside the step.
  EXPECT_EQ(name_of(plan->counted_context.at(0).phase_path_id), "forward");
  EXPECT_EQ(plan->counted_context.at(0).step, 3);
  EXPECT_EQ(name_of(plan->counted_context.at(1).phase_path_id), "step");
  EXPECT_EQ(name_of(plan->counted_context.at(2).phase_path_id), "step");
  EXPECT_EQ(plan->paths[plan->counted_context.at(0).phase_path_id - 1].domain(), "flopscope");
}

TEST(ImportAssemblerTest, HelloDescribesTheRank) {
  absl::StatusOr<ImportPlan> plan = ImportAssembler::Assemble(SmallRecording(), {"j", 5, kNow});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const v1::SessionHello& hello = plan->hello;
  EXPECT_EQ(hello.job_id(), "j");
  EXPECT_EQ(hello.rank(), 5);
  EXPECT_EQ(hello.world_size(), 6);
  EXPECT_EQ(hello.session_id(), ImportSessionId(0x1234, 5));
  ASSERT_EQ(hello.devices_size(), 1) << "only the device the kernels ran on";
  EXPECT_EQ(hello.devices(0).index(), 1u);
  EXPECT_EQ(plan->time_offset_ns, kAnchorNs) << "small times: the anchor";
  EXPECT_EQ(hello.start_time_ns(), kAnchorNs);
}

TEST(ImportAssemblerTest, SessionIdsFollowContentAndRank) {
  EXPECT_EQ(ImportSessionId(1, 0), ImportSessionId(1, 0));
  EXPECT_NE(ImportSessionId(1, 0), ImportSessionId(2, 0));
  EXPECT_NE(ImportSessionId(1, 0), ImportSessionId(1, 1));
}

}  // namespace
}  // namespace flopscope::importer
