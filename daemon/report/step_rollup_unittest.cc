#include "daemon/report/step_rollup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>

namespace flopscope::daemon {
namespace {

using ::testing::ElementsAre;

PathStepFigures WithBuckets(int64_t sid, uint64_t path_id, std::vector<BucketSum> buckets,
                            bool gpu = false) {
  PathStepFigures path;
  path.sid = sid;
  path.path_id = path_id;
  path.gpu = gpu;
  for (const BucketSum& sum : buckets) {
    ++path.occurrences;
    path.cpu_time_ns += sum.cpu_ns;
  }
  path.buckets = std::move(buckets);
  return path;
}

// A bucket's step, CPU and busy time (no pass split).
struct Sum {
  int64_t bucket = 0;
  int64_t cpu_ns = 0;
  int64_t busy_ns = 0;
};

PathStepFigures PathFigures(int64_t sid, uint64_t path_id, const std::vector<Sum>& sums,
                            bool gpu = false) {
  std::vector<BucketSum> buckets;
  for (const Sum& sum : sums) {
    BucketSum bucket;
    bucket.bucket = sum.bucket;
    bucket.cpu_ns = sum.cpu_ns;
    bucket.busy_ns = sum.busy_ns;
    buckets.push_back(bucket);
  }
  return WithBuckets(sid, path_id, std::move(buckets), gpu);
}

// Paths 1 (either session): module 0; path 2: module 1; path 9: phase 0 ("forward").
StepTarget Resolve(int64_t, uint64_t path_id) {
  if (path_id == 9) return {-1, 0};
  return {path_id == 1 ? 0 : 1, -1};
}

RankStepFigures Window(int64_t first, int64_t last, uint32_t uncounted,
                       std::vector<int64_t> counted) {
  RankStepFigures figures;
  figures.steps_marked = 10;
  figures.window_requested = true;
  figures.first_step = first;
  figures.last_step = last;
  figures.uncounted_steps = uncounted;
  figures.counted_steps = std::move(counted);
  return figures;
}

TEST(StepRollupTest, SamplesArePerRankAndStepWithSessionsAddedUp) {
  StepRollup rollup;
  // Rank 0 restarted inside step 3: both sessions' occurrences of module 0 add up there.
  RankStepFigures rank0 = Window(2, 4, 2, {4});
  rank0.modules.push_back(PathFigures(1, 1, {{2, 100, 0}, {3, 40, 0}}));
  rank0.modules.push_back(PathFigures(2, 1, {{3, 70, 0}}));
  rank0.modules.push_back(PathFigures(1, 2, {{2, 500, 30}, {3, 600, 20}}, /*gpu=*/true));
  rank0.phases.push_back(PathFigures(1, 9, {{2, 1000, 0}, {3, 1200, 0}}));
  RankStepFigures rank1 = Window(2, 4, 3, {});
  rank1.modules.push_back(PathFigures(1, 1, {{2, 90, 0}, {3, 95, 0}, {4, 400, 0}}));
  rank1.phases.push_back(PathFigures(1, 9, {{2, 900, 0}, {3, 950, 0}, {4, 2000, 0}}));
  rollup.AddRank(0, rank0, Resolve);
  rollup.AddRank(1, rank1, Resolve);

  v1::ModuleStats cpu_module;
  rollup.FillModule(0, &cpu_module);
  ASSERT_TRUE(cpu_module.has_step_latency());
  // Samples 100, 110 (40 + 70), 90, 95, 400: median 100.
  EXPECT_EQ(cpu_module.step_latency().samples(), 5u);
  EXPECT_EQ(cpu_module.step_latency().median_ns(), 100);
  EXPECT_EQ(cpu_module.step_latency().min_ns(), 90);
  EXPECT_EQ(cpu_module.step_latency().max_ns(), 400);
  EXPECT_FALSE(cpu_module.step_latency().gpu());

  v1::ModuleStats gpu_module;
  rollup.FillModule(1, &gpu_module);
  // Only rank 0 ran it: busy times 30 and 20.
  EXPECT_TRUE(gpu_module.step_latency().gpu());
  EXPECT_EQ(gpu_module.step_latency().samples(), 2u);
  EXPECT_EQ(gpu_module.step_latency().median_ns(), 25);

  v1::PhaseStats forward;
  rollup.FillPhase(0, &forward);
  EXPECT_EQ(forward.calls(), 5u);
  EXPECT_EQ(forward.cpu_time_ns(), 1000 + 1200 + 900 + 950 + 2000);
  EXPECT_EQ(forward.median_ns(), 1000);
  EXPECT_EQ(forward.min_ns(), 900);
  EXPECT_EQ(forward.max_ns(), 2000);

  v1::Report report;
  rollup.FillWindow(&report);
  EXPECT_TRUE(report.steps().requested());
  EXPECT_EQ(report.steps().first_step(), 2);
  EXPECT_EQ(report.steps().last_step(), 4);
  EXPECT_EQ(report.steps().uncounted_steps(), 5u);
  EXPECT_THAT(report.steps().counted_steps(), ElementsAre(4));
  EXPECT_EQ(rollup.steps_in_window(), 6u);
}

TEST(StepRollupTest, PhaseTimesPerRankAndStepComeInRankThenStepOrder) {
  StepRollup rollup;
  RankStepFigures rank3 = Window(0, 2, 3, {});
  // Two paths of the phase in step 1 add up; steps arrive out of order.
  rank3.phases.push_back(PathFigures(1, 9, {{2, 700, 0}, {1, 300, 0}, {0, 500, 0}}));
  rank3.phases.push_back(PathFigures(2, 9, {{1, 20, 0}}));
  RankStepFigures rank1 = Window(0, 1, 2, {});
  rank1.phases.push_back(PathFigures(1, 9, {{1, 60, 0}, {0, 40, 0}}));
  rollup.AddRank(3, rank3, Resolve);
  rollup.AddRank(1, rank1, Resolve);

  v1::PhaseStats forward;
  rollup.FillPhase(0, &forward);
  std::vector<std::tuple<int32_t, int64_t, int64_t>> times;
  for (const v1::PhaseStepTime& time : forward.per_step()) {
    times.emplace_back(time.rank(), time.step(), time.ns());
  }
  EXPECT_THAT(times, ElementsAre(std::tuple(1, 0, 40), std::tuple(1, 1, 60), std::tuple(3, 0, 500),
                                 std::tuple(3, 1, 300 + 20), std::tuple(3, 2, 700)));
  EXPECT_FALSE(forward.per_step_truncated());
}

TEST(StepRollupTest, OmittedStepTimesLeaveTheStatisticsWhole) {
  // ReportRequest.omit_step_times: the listing and the tree ask for the figures without the
  // per-step times (most of a long job's report); calls, time and median stay the same.
  StepRollup lean;
  lean.OmitStepTimes();
  StepRollup full;
  RankStepFigures rank = Window(0, 2, 3, {});
  rank.phases.push_back(PathFigures(1, 9, {{0, 500, 0}, {1, 300, 0}, {2, 700, 0}}));
  lean.AddRank(0, rank, Resolve);
  full.AddRank(0, rank, Resolve);
  v1::PhaseStats lean_row;
  v1::PhaseStats full_row;
  lean.FillPhase(0, &lean_row);
  full.FillPhase(0, &full_row);
  EXPECT_EQ(lean_row.per_step_size(), 0);
  EXPECT_FALSE(lean_row.per_step_truncated());
  EXPECT_EQ(full_row.per_step_size(), 3);
  full_row.clear_per_step();
  EXPECT_EQ(lean_row.SerializeAsString(), full_row.SerializeAsString());
  EXPECT_EQ(lean_row.median_ns(), 500);
}

// A bucket of `occurrences` occurrences of 100 ns each.
BucketSum Occurrences(int64_t bucket, uint32_t occurrences) {
  BucketSum sum;
  sum.bucket = bucket;
  sum.cpu_ns = 100 * occurrences;
  sum.occurrences = occurrences;
  return sum;
}

TEST(StepRollupTest, OccurrencesPerStepIsTheMostFrequentCountOverRanksAndSteps) {
  // Two ranks of 3 micro-batches per step, each with a short last step; rank 1's step 2 has
  // them on two paths (a restart), which add up.
  StepRollup rollup;
  RankStepFigures rank0 = Window(0, 2, 3, {});
  rank0.phases.push_back(
      WithBuckets(1, 9, {Occurrences(0, 3), Occurrences(1, 3), Occurrences(2, 1)}));
  RankStepFigures rank1 = Window(0, 2, 3, {});
  rank1.phases.push_back(
      WithBuckets(1, 9, {Occurrences(0, 3), Occurrences(1, 2), Occurrences(2, 1)}));
  rank1.phases.push_back(WithBuckets(2, 9, {Occurrences(1, 1)}));
  rollup.AddRank(0, rank0, Resolve);
  rollup.AddRank(1, rank1, Resolve);
  v1::PhaseStats forward;
  rollup.FillPhase(0, &forward);
  EXPECT_EQ(forward.occurrences_per_step(), 3u);  // 3 in four steps, 1 in two

  // A tie goes to the larger count; without marked steps there is none.
  StepRollup tied;
  RankStepFigures two = Window(0, 1, 2, {});
  two.phases.push_back(WithBuckets(1, 9, {Occurrences(0, 4), Occurrences(1, 2)}));
  tied.AddRank(0, two, Resolve);
  v1::PhaseStats tied_row;
  tied.FillPhase(0, &tied_row);
  EXPECT_EQ(tied_row.occurrences_per_step(), 4u);
  StepRollup unmarked;
  RankStepFigures lone;
  lone.phases.push_back(WithBuckets(1, 9, {Occurrences(0, 1), Occurrences(1, 1)}));
  unmarked.AddRank(0, lone, Resolve);
  v1::PhaseStats unmarked_row;
  unmarked.FillPhase(0, &unmarked_row);
  EXPECT_EQ(unmarked_row.occurrences_per_step(), 0u);
}

TEST(StepRollupTest, WithoutMarkedStepsPhasesHaveNoPerStepTimes) {
  StepRollup rollup;
  RankStepFigures figures;  // steps_marked 0: every occurrence is a bucket of its own
  figures.phases.push_back(PathFigures(1, 9, {{0, 10, 0}, {1, 20, 0}}));
  rollup.AddRank(0, figures, Resolve);
  v1::PhaseStats forward;
  rollup.FillPhase(0, &forward);
  EXPECT_EQ(forward.calls(), 2u);
  EXPECT_EQ(forward.per_step_size(), 0);
}

TEST(StepRollupTest, WithoutAWindowModulesGetNoStepLatencyAndUnknownRowsStayUntouched) {
  StepRollup rollup;
  RankStepFigures figures;
  figures.steps_marked = 3;
  figures.last_step = 2;
  figures.uncounted_steps = 3;
  figures.phases.push_back(PathFigures(1, 9, {{0, 10, 0}, {1, 30, 0}, {2, 20, 0}}));
  rollup.AddRank(0, figures, Resolve);
  v1::ModuleStats module;
  rollup.FillModule(0, &module);
  EXPECT_FALSE(module.has_step_latency());
  v1::PhaseStats untouched;
  untouched.set_calls(7);
  rollup.FillPhase(5, &untouched);
  EXPECT_EQ(untouched.calls(), 7u);
  v1::PhaseStats forward;
  rollup.FillPhase(0, &forward);
  EXPECT_EQ(forward.median_ns(), 20);
  v1::Report report;
  rollup.FillWindow(&report);
  EXPECT_FALSE(report.steps().requested());
  EXPECT_EQ(report.steps().uncounted_steps(), 3u);
}

TEST(StepRollupTest, NoStepsAndNoWindowLeaveTheReportWithoutSteps) {
  StepRollup rollup;
  rollup.AddRank(0, RankStepFigures{}, Resolve);
  v1::Report report;
  rollup.FillWindow(&report);
  EXPECT_FALSE(report.has_steps());
}

// A bucket of module 0 whose `forward` / `backward` parts are given.
BucketSum Passes(int64_t step, int64_t forward_ns, int64_t backward_ns, int64_t other_ns) {
  BucketSum sum;
  sum.bucket = step;
  sum.cpu_ns = forward_ns + backward_ns + other_ns;
  if (forward_ns > 0) sum.forward = PassSum{true, forward_ns, 0};
  if (backward_ns > 0) sum.backward = PassSum{true, backward_ns, 0};
  return sum;
}

TEST(StepRollupTest, ForwardAndBackwardLatenciesAreMediansOverTheStepsThatRanEachPass) {
  StepRollup rollup;
  RankStepFigures rank = Window(1, 3, 3, {});
  const std::vector<int64_t> forward = {100, 300, 200};
  const std::vector<int64_t> backward = {250, 0, 150};  // step 2 had no backward
  std::vector<BucketSum> buckets;
  for (size_t i = 0; i < forward.size(); ++i) {
    buckets.push_back(Passes(static_cast<int64_t>(i) + 1, forward[i], backward[i], 7));
  }
  rank.modules.push_back(WithBuckets(1, 1, buckets));
  rollup.AddRank(0, rank, Resolve);
  v1::ModuleStats module;
  rollup.FillModule(0, &module);
  ASSERT_TRUE(module.has_fwd_step_latency());
  ASSERT_TRUE(module.has_bwd_step_latency());
  std::vector<int64_t> ran_backward;
  for (int64_t ns : backward) {
    if (ns > 0) ran_backward.push_back(ns);
  }
  EXPECT_EQ(module.fwd_step_latency().samples(), forward.size());
  EXPECT_EQ(module.fwd_step_latency().median_ns(), Summarize(forward).median_ns);
  EXPECT_EQ(module.bwd_step_latency().samples(), ran_backward.size());
  EXPECT_EQ(module.bwd_step_latency().median_ns(), Summarize(ran_backward).median_ns);
  // The all-pass latency still counts everything, the time between the passes included.
  EXPECT_GT(module.step_latency().median_ns(), module.fwd_step_latency().median_ns());
  v1::ModuleStats other;
  rollup.FillModule(1, &other);
  EXPECT_FALSE(other.has_fwd_step_latency());
}

// ExpectRanks only sizes the samples' room: whatever it says, even wrongly, the figures are the
// same.
TEST(StepRollupTest, TheExpectedRankCountChangesNoFigure) {
  const auto fill = [](std::optional<size_t> expected) {
    StepRollup rollup;
    if (expected) rollup.ExpectRanks(*expected);
    for (int32_t rank = 0; rank < 5; ++rank) {
      RankStepFigures figures = Window(0, 2, 3, {});
      figures.modules.push_back(PathFigures(1, 1, {{0, 10 + rank, 0}, {1, 30, 0}, {2, 7, 0}}));
      figures.modules.push_back(PathFigures(1, 2, {{1, 100 * rank, 5 * rank}}, /*gpu=*/true));
      rollup.AddRank(rank, figures, Resolve);
    }
    std::string out;
    for (int module = 0; module < 2; ++module) {
      v1::ModuleStats row;
      rollup.FillModule(module, &row);
      out += row.SerializeAsString();
    }
    return out;
  };
  const std::string unhinted = fill(std::nullopt);
  EXPECT_FALSE(unhinted.empty());
  for (size_t expected : {size_t{0}, size_t{1}, size_t{5}, size_t{1000}}) {
    EXPECT_EQ(fill(expected), unhinted) << "ExpectRanks(" << expected << ")";
  }
}

TEST(StepRollupTest, TheWindowNamesUnfinishedStepsAndPoolsTheStepPeriods) {
  StepRollup rollup;
  RankStepFigures rank0 = Window(1, 4, 3, {});
  rank0.unfinished_steps = {4};
  rank0.step_periods_ns = {100, 300, 200};
  RankStepFigures rank1 = Window(1, 4, 4, {});
  rank1.step_periods_ns = {400};
  rollup.AddRank(0, rank0, Resolve);
  rollup.AddRank(1, rank1, Resolve);
  EXPECT_THAT(rollup.unfinished_steps(), ElementsAre(4));
  v1::Report report;
  rollup.FillWindow(&report);
  EXPECT_THAT(report.steps().unfinished_steps(), ElementsAre(4));
  EXPECT_EQ(report.steps().uncounted_steps(), 7u);
  ASSERT_TRUE(report.steps().has_step_period());
  EXPECT_EQ(report.steps().step_period().samples(), 4u);
  EXPECT_EQ(report.steps().step_period().median_ns(), 250);
  EXPECT_EQ(report.steps().step_period().min_ns(), 100);
  EXPECT_EQ(report.steps().step_period().max_ns(), 400);
  // No period sample (one step per rank): no period at all.
  StepRollup lone;
  lone.AddRank(0, Window(0, 0, 1, {}), Resolve);
  v1::Report lone_report;
  lone.FillWindow(&lone_report);
  EXPECT_FALSE(lone_report.steps().has_step_period());
}

}  // namespace
}  // namespace flopscope::daemon
