#include "counters/metric_planner.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "absl/algorithm/container.h"
#include "counters/host_object.h"
#include "counters/testing/host_api_for_test.h"

namespace flopscope::counters {
namespace {

using testing::HostApiForTest;

std::string Rejections(const MetricPlan& plan) {
  std::string text;
  for (const auto& [metric, reason] : plan.rejected) text += metric + ": " + reason + "\n";
  return text;
}

// Pass counts recorded independently in ../shared/docs/cupti.md §2 ("Pass counts [probe]": FULL is
// the column NT+TC+I+T; CHEAP, NT+T+I, is 2 passes).
struct RecordedPasses {
  const char* chip;
  uint32_t full;
  uint32_t cheap;
};
constexpr RecordedPasses kRecorded[] = {
    {"GA100", 6, 2}, {"AD102", 6, 2}, {"GH100", 6, 2}, {"GB100", 6, 2}, {"GB202", 10, 2},
};

TEST(MetricPlannerTest, RecordedChipsAcceptEveryCandidateAtTheRecordedPassCount) {
  MetricPlanner planner(HostApiForTest());
  for (const RecordedPasses& recorded : kRecorded) {
    for (MetricSetKind kind : {MetricSetKind::kFull, MetricSetKind::kCheap}) {
      SCOPED_TRACE(std::string(recorded.chip) + " " + MetricSetName(kind));
      std::vector<std::string> candidates;
      ASSERT_TRUE(CandidateMetrics(recorded.chip, kind, &candidates));
      MetricPlan plan;
      std::string error;
      ASSERT_TRUE(planner.Plan(recorded.chip, kind, nullptr, 0, &plan, &error)) << error;
      EXPECT_TRUE(plan.rejected.empty()) << Rejections(plan);
      EXPECT_EQ(plan.metrics, candidates);
      EXPECT_EQ(plan.passes, kind == MetricSetKind::kFull ? recorded.full : recorded.cheap);
      EXPECT_FALSE(plan.config_image.empty());
      EXPECT_EQ(plan.chip, recorded.chip);
      EXPECT_EQ(plan.kind, kind);
    }
  }
}

// The family table is data typed in by hand: every chip of every row must accept every name of
// its row, or the table (not the planner) is wrong.
TEST(MetricPlannerTest, EveryFamilyChipThisCuptiSupportsAcceptsItsWholeRow) {
  MetricPlanner planner(HostApiForTest());
  std::vector<std::string> supported;
  std::string error;
  ASSERT_TRUE(planner.SupportedChips(&supported, &error)) << error;
  int planned = 0;
  for (const std::string& chip : ChipsWithMetricFamily()) {
    if (!absl::c_linear_search(supported, chip)) continue;  // a chip newer than this libcupti
    MetricPlan plan;
    ASSERT_TRUE(planner.Plan(chip, MetricSetKind::kFull, nullptr, 0, &plan, &error)) << error;
    EXPECT_TRUE(plan.rejected.empty()) << chip << "\n" << Rejections(plan);
    EXPECT_GE(plan.passes, 2u) << chip;  // instrumented and hardware counters never share one
    ++planned;
  }
  EXPECT_GE(planned, 5);
}

TEST(MetricPlannerTest, OneBadNameIsRejectedAloneAndTheRestIsPlanned) {
  MetricPlanner planner(HostApiForTest());
  std::vector<std::string> cheap;
  ASSERT_TRUE(CandidateMetrics("GH100", MetricSetKind::kCheap, &cheap));
  std::vector<std::string> candidates = cheap;
  const std::string bad = "sm__inst_executed_pipe_tensor_op_hgmma.sum";  // rejected everywhere
  // First in line: on a shared host object it would poison every later add.
  candidates.insert(candidates.begin(), bad);
  MetricPlan plan;
  std::string error;
  ASSERT_TRUE(
      planner.PlanMetrics("GH100", MetricSetKind::kCheap, candidates, nullptr, 0, &plan, &error))
      << error;
  ASSERT_EQ(plan.rejected.size(), 1u) << Rejections(plan);
  EXPECT_EQ(plan.rejected[0].first, bad);
  EXPECT_NE(plan.rejected[0].second.find("CUPTI_ERROR"), std::string::npos)
      << plan.rejected[0].second;
  EXPECT_EQ(plan.metrics, cheap);
  EXPECT_EQ(plan.passes, 2u);
}

TEST(MetricPlannerTest, DuplicateCandidatesArePlannedOnce) {
  MetricPlanner planner(HostApiForTest());
  const std::vector<std::string> candidates = {"gpu__time_duration.sum", "dram__bytes.sum",
                                               "gpu__time_duration.sum"};
  MetricPlan plan;
  std::string error;
  ASSERT_TRUE(
      planner.PlanMetrics("GA100", MetricSetKind::kCheap, candidates, nullptr, 0, &plan, &error))
      << error;
  EXPECT_EQ(plan.metrics, (std::vector<std::string>{"gpu__time_duration.sum", "dram__bytes.sum"}));
  EXPECT_EQ(plan.passes, 1u);
}

TEST(MetricPlannerTest, NothingAcceptedIsAnError) {
  MetricPlanner planner(HostApiForTest());
  MetricPlan plan;
  std::string error;
  EXPECT_FALSE(planner.PlanMetrics("GA100", MetricSetKind::kFull, {"no_such__metric.sum"}, nullptr,
                                   0, &plan, &error));
  EXPECT_NE(error.find("no_such__metric.sum"), std::string::npos) << error;
  EXPECT_NE(error.find("GA100"), std::string::npos) << error;
}

TEST(MetricPlannerTest, AChipWithoutAFamilyGetsAClearError) {
  MetricPlanner planner(HostApiForTest());
  for (const char* chip : {"XY999", "TU104"}) {
    MetricPlan plan;
    plan.chip = "untouched";
    std::string error;
    EXPECT_FALSE(planner.Plan(chip, MetricSetKind::kFull, nullptr, 0, &plan, &error)) << chip;
    EXPECT_NE(error.find(chip), std::string::npos) << error;
    EXPECT_NE(error.find("GH100"), std::string::npos) << error;  // lists the chips that work
    EXPECT_NE(error.find("GB202"), std::string::npos) << error;
    EXPECT_EQ(plan.chip, "untouched");
  }
}

TEST(MetricPlannerTest, AChipCuptiDoesNotKnowGetsAClearError) {
  MetricPlanner planner(HostApiForTest());
  MetricPlan plan;
  std::string error;
  EXPECT_FALSE(planner.PlanMetrics("XY999", MetricSetKind::kCheap, {"gpu__time_duration.sum"},
                                   nullptr, 0, &plan, &error));
  EXPECT_NE(error.find("'XY999'"), std::string::npos) << error;
  EXPECT_NE(error.find("CUPTI_ERROR"), std::string::npos) << error;
}

TEST(MetricPlannerTest, SupportedChipsComeFromCupti) {
  MetricPlanner planner(HostApiForTest());
  std::vector<std::string> chips;
  std::string error;
  ASSERT_TRUE(planner.SupportedChips(&chips, &error)) << error;
  EXPECT_FALSE(chips.empty());
  EXPECT_TRUE(absl::c_linear_search(chips, "GH100"));
}

TEST(MetricPlannerTest, AnIncompleteApiTableIsAnErrorNotACrash) {
  MetricPlanner planner{ProfilerHostApi{}};
  MetricPlan plan;
  std::vector<std::string> chips;
  std::string error;
  EXPECT_FALSE(planner.Plan("GH100", MetricSetKind::kCheap, nullptr, 0, &plan, &error));
  EXPECT_NE(error.find("libcupti"), std::string::npos) << error;
  EXPECT_FALSE(planner.SupportedChips(&chips, &error));
}

// The hazard the planner is built around (cupti.md §2). If a CUPTI release stops poisoning host
// objects this fails, and the per-name validation could be relaxed.
TEST(HostObjectTest, ARejectedNamePoisonsTheObject) {
  HostObject host;
  std::string error, result;
  ASSERT_TRUE(host.Initialize(HostApiForTest(), "GH100", nullptr, 0, &error)) << error;
  EXPECT_FALSE(host.AddMetrics({"sm__inst_executed_pipe_tensor_op_hgmma.sum"}, &result));
  EXPECT_FALSE(host.AddMetrics({"gpu__time_duration.sum"}, &result));
  HostObject fresh;
  ASSERT_TRUE(fresh.Initialize(HostApiForTest(), "GH100", nullptr, 0, &error)) << error;
  EXPECT_TRUE(fresh.AddMetrics({"gpu__time_duration.sum"}, &result)) << result;
}

TEST(HostObjectTest, DescribesMetricsWithoutPoisoning) {
  HostObject host;
  std::string error, description, result;
  ASSERT_TRUE(host.Initialize(HostApiForTest(), "GH100", nullptr, 0, &error)) << error;
  ASSERT_TRUE(
      host.Describe("sm__sass_thread_inst_executed_op_ffma_pred_on.sum", &description, &error))
      << error;
  EXPECT_NE(description.find("FFMA"), std::string::npos) << description;
  EXPECT_FALSE(host.Describe("no_such__metric.sum", &description, &error));
  EXPECT_NE(error.find("no_such__metric.sum"), std::string::npos) << error;
  EXPECT_TRUE(host.AddMetrics({"gpu__time_duration.sum"}, &result)) << result;
}

}  // namespace
}  // namespace flopscope::counters
