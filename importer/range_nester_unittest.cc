#include "importer/range_nester.h"

#include <gtest/gtest.h>

#include <map>

namespace flopscope::importer {
namespace {

class RangeNesterTest : public ::testing::Test {
 protected:
  void Add(uint64_t thread, int64_t start, int64_t end, const std::string& name,
           RangeOrigin origin = RangeOrigin::kAnnotation, uint64_t external_id = 0,
           const std::string& domain = "") {
    RawRange range;
    range.thread = thread;
    range.start_ns = start;
    range.end_ns = end;
    range.name = recording_.strings.Intern(name);
    range.domain = recording_.strings.Intern(domain);
    range.origin = origin;
    range.external_id = external_id;
    recording_.ranges.push_back(range);
  }

  // "domain:full/path" -> occurrences.
  std::map<std::string, int> Calls(RangeNester& nester) {
    std::map<std::string, int> calls;
    for (const PlannedRange& range : nester.ranges()) {
      const v1::RangePath& path = nester.paths().paths()[range.path_id - 1];
      ++calls[path.domain() + ":" + nester.paths().FullName(range.path_id)];
    }
    return calls;
  }

  TraceRecording recording_;
};

TEST_F(RangeNesterTest, ModulesNestByTimeAndSiblingsMayTouch) {
  Add(1, 0, 100, "Model_0", RangeOrigin::kPythonModule);
  Add(1, 10, 50, "Linear_0", RangeOrigin::kPythonModule);
  Add(1, 50, 90, "Linear_1", RangeOrigin::kPythonModule);  // starts where Linear_0 ends
  Add(2, 5, 6, "Linear_0", RangeOrigin::kPythonModule);    // another thread
  RangeNester nester(recording_);
  nester.Run();
  EXPECT_EQ(
      Calls(nester),
      (std::map<std::string, int>{
          {":Model_0", 1}, {":Model_0/Linear_0", 1}, {":Model_0/Linear_1", 1}, {":Linear_0", 1}}));
  const std::vector<PlannedRange>& ranges = nester.ranges();
  ASSERT_EQ(ranges.size(), 4u);
  // Parent instance ids follow the nesting.
  std::map<uint64_t, uint64_t> parent_of;
  for (const PlannedRange& r : ranges) parent_of[r.instance_id] = r.parent_instance_id;
  for (const PlannedRange& r : ranges) {
    if (nester.paths().FullName(r.path_id) == "Model_0/Linear_1") {
      EXPECT_NE(parent_of[r.instance_id], 0u);
    }
  }
}

TEST_F(RangeNesterTest, StepsAndPhasesLiveInTheFlopscopeDomainAndParentNoModule) {
  Add(1, 0, 1000, "ProfilerStep#7");
  Add(1, 10, 500, "## forward ##");
  Add(1, 20, 400, "DistributedDataParallel.forward");
  Add(1, 600, 900, "## optimizer ##");
  Add(1, 610, 890, "Optimizer.step#SGD.step");  // inside the optimizer phase: a module
  RangeNester nester(recording_);
  nester.Run();
  EXPECT_EQ(Calls(nester), (std::map<std::string, int>{
                               {"flopscope:step", 1},
                               {"flopscope:step/forward", 1},
                               {"flopscope:step/optimizer", 1},
                               {":DistributedDataParallel.forward", 1},
                               {":Optimizer.step#SGD.step", 1},
                           }));
  ASSERT_EQ(nester.step_numbers(), std::vector<int64_t>{7});
}

TEST_F(RangeNesterTest, GpuAnnotationsThatMirrorCpuOnesAreDropped) {
  Add(1, 0, 100, "block", RangeOrigin::kAnnotation, 42);
  Add(StreamKey(0, 7), 5, 95, "block", RangeOrigin::kGpuAnnotation, 42);
  Add(StreamKey(0, 7), 200, 300, "gpu only", RangeOrigin::kGpuAnnotation, 43);
  RangeNester nester(recording_);
  nester.Run();
  EXPECT_EQ(nester.gpu_duplicates(), 1u);
  EXPECT_EQ(Calls(nester), (std::map<std::string, int>{{":block", 1}, {":gpu only", 1}}));
  EXPECT_EQ(nester.modules().size(), 2u);
}

TEST_F(RangeNesterTest, NsightDomainsAndStartEndRanges) {
  Add(1, 0, 100, "step", RangeOrigin::kAnnotation, 0, "flopscope");
  Add(1, 10, 90, "attention", RangeOrigin::kAnnotation, 0, "my_lib");
  Add(1, 20, 30, "io", RangeOrigin::kStartEnd);
  Add(1, 40, 50, "inner", RangeOrigin::kAnnotation);
  RangeNester nester(recording_);
  nester.Run();
  EXPECT_EQ(Calls(nester), (std::map<std::string, int>{{"flopscope:step", 1},
                                                       {"my_lib:attention", 1},
                                                       {":attention/io", 1},
                                                       {":attention/inner", 1}}));
  for (const PlannedRange& range : nester.ranges()) {
    const bool start_end = nester.paths().paths()[range.path_id - 1].name() == "io";
    EXPECT_EQ(range.kind, start_end ? v1::RANGE_KIND_START_END : v1::RANGE_KIND_PUSH_POP);
  }
  EXPECT_EQ(nester.modules().size(), 2u) << "start/end ranges never hold kernels";
}

TEST_F(RangeNesterTest, NestingDeeperThanTheDaemonAllowsIsCountedNotSent) {
  for (int depth = 0; depth < 300; ++depth) Add(1, depth, 1000 - depth, "level");
  RangeNester nester(recording_);
  nester.Run();
  EXPECT_EQ(nester.ranges().size(), RangeNester::kMaxDepth);
  EXPECT_EQ(nester.overflowed(), 300 - RangeNester::kMaxDepth);
}

}  // namespace
}  // namespace flopscope::importer
