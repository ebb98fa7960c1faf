#include "daemon/report/step_statistics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "daemon/report/session_path_table.h"
#include "daemon/store/step_index.h"

namespace flopscope::daemon {
namespace {

using ::testing::ElementsAre;

RangeOccurrence Range(int64_t start, int64_t duration, bool counted = false) {
  return RangeOccurrence{start, duration, 0, false, counted};
}

RangeOccurrence Gpu(int64_t start, int64_t duration, int64_t busy) {
  return RangeOccurrence{start, duration, busy, true, false};
}

const PathStepFigures* Find(const std::vector<PathStepFigures>& paths, uint64_t path_id) {
  for (const PathStepFigures& path : paths) {
    if (path.path_id == path_id) return &path;
  }
  return nullptr;
}

std::vector<int64_t> Buckets(const PathStepFigures& path) {
  std::vector<int64_t> buckets;
  for (const BucketSum& sum : path.buckets) buckets.push_back(sum.bucket);
  return buckets;
}

std::vector<int64_t> CpuSums(const PathStepFigures& path) {
  std::vector<int64_t> sums;
  for (const BucketSum& sum : path.buckets) sums.push_back(sum.cpu_ns);
  return sums;
}

TEST(StepIndexTest, NumbersStepsInStartOrderAndPlacesMoments) {
  // Committed out of order (a later session's steps first): numbering follows the start.
  const StepIndex index({{3000, 3900}, {1000, 1900}, {2000, 2900}});
  ASSERT_EQ(index.size(), 3);
  EXPECT_EQ(index.at(0).start_ns, 1000);
  EXPECT_EQ(index.at(2).start_ns, 3000);
  EXPECT_EQ(index.StepAt(999), -1);
  EXPECT_EQ(index.StepAt(1000), 0);
  EXPECT_EQ(index.StepAt(1900), 0);
  EXPECT_EQ(index.StepAt(1950), -1);  // between steps
  EXPECT_EQ(index.StepAt(2500), 1);
  EXPECT_EQ(index.StepAt(3900), 2);
  EXPECT_EQ(index.StepAt(4000), -1);
  EXPECT_EQ(StepIndex({}).StepAt(5), -1);
}

TEST(SessionPathTableTest, KeepsOneValuePerSessionAndPathDenseOrNot) {
  SessionPathTable<int> table(-1);
  const uint64_t far = SessionPathTable<int>::kDenseIds + 7;  // an untrusted file's id
  table.At(1, 3) = 13;
  table.At(2, 3) = 23;  // the same id in another session is another path
  table.At(1, far) = 99;
  table.At(1, 0) = 10;  // back to session 1 after session 2
  EXPECT_EQ(table.Get(1, 3), 13);
  EXPECT_EQ(table.Get(2, 3), 23);
  EXPECT_EQ(table.Get(1, far), 99);
  EXPECT_EQ(table.Get(2, far), -1);
  EXPECT_EQ(table.Get(1, 0), 10);
  EXPECT_EQ(table.Get(1, 2), -1);  // below a set id, never set
  EXPECT_EQ(table.Get(3, 1), -1);  // a session never seen
  table.Clear();
  EXPECT_EQ(table.Get(1, 3), -1);
}

TEST(StepIndexTest, AHintedLookupAgreesWithTheSearchInAnyOrder) {
  // Steps with gaps; moments before, inside, between and after them, asked for in time order,
  // backwards and shuffled: the hint only saves searches, it never changes an answer.
  std::vector<StepSpan> spans;
  for (int64_t step = 0; step < 50; ++step) spans.push_back({step * 100, step * 100 + 60});
  const StepIndex index(spans);
  std::vector<int64_t> moments;
  for (int64_t t = -30; t < 5100; t += 7) moments.push_back(t);
  std::vector<std::vector<int64_t>> orders = {moments, {moments.rbegin(), moments.rend()}};
  std::vector<int64_t> shuffled = moments;
  for (size_t i = 0; i < shuffled.size(); ++i)
    std::swap(shuffled[i], shuffled[(i * 7919) % shuffled.size()]);
  orders.push_back(shuffled);
  for (const std::vector<int64_t>& order : orders) {
    size_t hint = 0;
    for (int64_t t : order) {
      size_t fresh = 0;
      ASSERT_EQ(index.StepAt(t, &hint), index.StepAt(t, &fresh)) << "at " << t;
      const int64_t expected = t >= 0 && t % 100 <= 60 && t < 5000 ? t / 100 : -1;
      ASSERT_EQ(index.StepAt(t), expected) << "at " << t;
    }
  }
}

TEST(StepIndexTest, OverlappingStepRangesAreOneStep) {
  // Two threads each open `step` for the same training step; the injector counts it once.
  const StepIndex index({{1000, 1900}, {1100, 2000}, {3000, 3900}, {3900, 4100}});
  ASSERT_EQ(index.size(), 3);
  EXPECT_EQ(index.at(0).start_ns, 1000);
  EXPECT_EQ(index.at(0).end_ns, 2000);
  EXPECT_EQ(index.at(1).end_ns, 3900);  // the next opens as this one closes: two steps
  EXPECT_EQ(index.at(2).start_ns, 3900);
  EXPECT_EQ(index.StepAt(1950), 0);
  EXPECT_EQ(index.StepAt(4000), 2);
}

TEST(SummarizeTest, MedianOfOddAndEvenCounts) {
  const SampleSummary odd = Summarize({500, 100, 300});
  EXPECT_EQ(odd.samples, 3u);
  EXPECT_EQ(odd.median_ns, 300);
  EXPECT_EQ(odd.min_ns, 100);
  EXPECT_EQ(odd.max_ns, 500);
  EXPECT_EQ(Summarize({400, 100, 300, 200}).median_ns, 250);
  EXPECT_EQ(Summarize({1, 2}).median_ns, 1);  // rounded down
  const int64_t big = int64_t{1} << 62;
  EXPECT_EQ(Summarize({big, big + 2}).median_ns, big + 1);  // no overflow
  EXPECT_EQ(Summarize({}).samples, 0u);
}

// Four steps of 1000 ns; a `forward` phase and a module in each; step 2 counted.
StepStatistics FourSteps(std::optional<StepWindowRequest> window) {
  StepStatistics statistics(window);
  for (int64_t step = 0; step < 4; ++step) {
    const int64_t start = 10'000 * (step + 1);
    statistics.AddPhase(1, 7, Range(start, 1000 + 100 * step), /*is_step=*/true);
    statistics.AddPhase(1, 8, Range(start + 10, 300 + step), /*is_step=*/false);
    // Two occurrences of the module per step: their figures add up within the step.
    statistics.AddModule(1, 20, Gpu(start + 20, 100, 40 + step));
    statistics.AddModule(1, 20, Gpu(start + 200, 100, 10));
  }
  // A range closed inside a counter window marks its step counted.
  statistics.AddModule(1, 21, Range(30'500, 5, /*counted=*/true));
  return statistics;
}

TEST(StepStatisticsTest, PhasesPerStepLeaveCountedStepsOut) {
  RankStepFigures figures = FourSteps(std::nullopt).Finish();
  EXPECT_EQ(figures.steps_marked, 4);
  EXPECT_FALSE(figures.window_requested);
  EXPECT_EQ(figures.first_step, 0);
  EXPECT_EQ(figures.last_step, 3);
  EXPECT_EQ(figures.uncounted_steps, 3u);
  EXPECT_THAT(figures.counted_steps, ElementsAre(2));
  const PathStepFigures* step = Find(figures.phases, 7);
  ASSERT_NE(step, nullptr);
  EXPECT_THAT(Buckets(*step), ElementsAre(0, 1, 3));
  EXPECT_THAT(CpuSums(*step), ElementsAre(1000, 1100, 1300));
  EXPECT_EQ(step->occurrences, 3u);
  EXPECT_EQ(step->cpu_time_ns, 3400);
  const PathStepFigures* forward = Find(figures.phases, 8);
  ASSERT_NE(forward, nullptr);
  EXPECT_THAT(CpuSums(*forward), ElementsAre(300, 301, 303));
  // Without a window, modules keep their totals in module_stats: no per-step figures.
  EXPECT_TRUE(figures.modules.empty());
}

TEST(StepStatisticsTest, AWindowGivesModulesPerStepFigures) {
  RankStepFigures figures = FourSteps(StepWindowRequest{1, 2}).Finish();
  EXPECT_TRUE(figures.window_requested);
  EXPECT_EQ(figures.first_step, 1);
  EXPECT_EQ(figures.last_step, 2);
  EXPECT_EQ(figures.uncounted_steps, 1u);
  EXPECT_THAT(figures.counted_steps, ElementsAre(2));
  const PathStepFigures* module = Find(figures.modules, 20);
  ASSERT_NE(module, nullptr);
  EXPECT_TRUE(module->gpu);
  ASSERT_THAT(Buckets(*module), ElementsAre(1));
  EXPECT_EQ(module->buckets[0].cpu_ns, 200);
  EXPECT_EQ(module->buckets[0].busy_ns, 41 + 10);
  EXPECT_EQ(module->occurrences, 2u);
  EXPECT_EQ(Find(figures.modules, 21), nullptr);  // counted: never a figure
  EXPECT_THAT(Buckets(*Find(figures.phases, 8)), ElementsAre(1));
}

TEST(StepStatisticsTest, AnOpenWindowRunsToTheLastStepAndOnePastItIsEmpty) {
  RankStepFigures open = FourSteps(StepWindowRequest{3, std::nullopt}).Finish();
  EXPECT_EQ(open.first_step, 3);
  EXPECT_EQ(open.last_step, 3);
  EXPECT_EQ(open.uncounted_steps, 1u);
  RankStepFigures past = FourSteps(StepWindowRequest{4, 9}).Finish();
  EXPECT_GT(past.first_step, past.last_step);
  EXPECT_EQ(past.uncounted_steps, 0u);
  EXPECT_TRUE(past.counted_steps.empty());
  EXPECT_TRUE(past.modules.empty());
  EXPECT_EQ(past.steps_marked, 4);
}

TEST(StepStatisticsTest, WithoutStepsEveryPhaseOccurrenceIsASample) {
  StepStatistics statistics(std::nullopt);
  statistics.AddPhase(1, 8, Range(100, 30), false);
  statistics.AddPhase(1, 8, Range(200, 10), false);
  statistics.AddPhase(2, 3, Range(300, 20), false);  // another session's path of the phase
  statistics.AddPhase(1, 8, Range(400, 999, /*counted=*/true), false);
  RankStepFigures figures = statistics.Finish();
  EXPECT_EQ(figures.steps_marked, 0);
  EXPECT_EQ(figures.uncounted_steps, 0u);
  const PathStepFigures* forward = Find(figures.phases, 8);
  ASSERT_NE(forward, nullptr);
  EXPECT_THAT(CpuSums(*forward), ElementsAre(30, 10));
  EXPECT_EQ(forward->occurrences, 2u);
  // Buckets are distinct across paths, so occurrences never merge.
  EXPECT_EQ(Find(figures.phases, 3)->buckets[0].bucket, 2);
}

TEST(StepStatisticsTest, OccurrencesOutsideEveryStepCountInTotalsOnly) {
  StepStatistics statistics(std::nullopt);
  statistics.AddPhase(1, 7, Range(1000, 100), true);
  statistics.AddPhase(1, 8, Range(1010, 50), false);
  statistics.AddPhase(1, 8, Range(5000, 70), false);  // an evaluation pass after the steps
  const RankStepFigures figures = statistics.Finish();
  const PathStepFigures* forward = Find(figures.phases, 8);
  EXPECT_EQ(forward->occurrences, 2u);
  EXPECT_EQ(forward->cpu_time_ns, 120);
  EXPECT_THAT(CpuSums(*forward), ElementsAre(50));
}

TEST(StepStatisticsTest, EachStepCountsTheOccurrencesItHolds) {
  // Gradient accumulation: three forwards in each of two steps, one in a short last step, and
  // an evaluation forward between steps that belongs to none.
  const std::vector<int> forwards = {3, 3, 1};
  StepStatistics statistics(std::nullopt);
  for (size_t step = 0; step < forwards.size(); ++step) {
    const int64_t start = 10'000 * static_cast<int64_t>(step + 1);
    statistics.AddPhase(1, 7, Range(start, 5000), /*is_step=*/true);
    for (int micro = 0; micro < forwards[step]; ++micro) {
      statistics.AddPhase(1, 8, Range(start + 10 + 1000 * micro, 100), /*is_step=*/false);
    }
  }
  statistics.AddPhase(1, 8, Range(16'000, 100), /*is_step=*/false);
  const RankStepFigures figures = statistics.Finish();
  const PathStepFigures* forward = Find(figures.phases, 8);
  ASSERT_NE(forward, nullptr);
  std::vector<uint32_t> counts;
  for (const BucketSum& sum : forward->buckets) counts.push_back(sum.occurrences);
  EXPECT_THAT(counts, ElementsAre(forwards[0], forwards[1], forwards[2]));
  EXPECT_EQ(forward->occurrences, 3u + 3u + 1u + 1u);  // the totals keep the evaluation
}

TEST(StepStatisticsTest, ModuleOccurrencesSplitIntoForwardAndBackwardByTheirPassRange) {
  // Two steps; in each, a forward range, then a backward range. The module runs once in each
  // pass and once between them (in neither).
  StepStatistics statistics(StepWindowRequest{0, std::nullopt});
  struct Pass2 {
    int64_t fwd_start, bwd_start;
  };
  const std::vector<Pass2> steps = {{1000, 1500}, {3000, 3500}};
  const int64_t kFwd = 100, kBwd = 170, kBetween = 30;
  int64_t expected_forward = 0, expected_backward = 0, expected_total = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Pass2& step = steps[i];
    const int64_t grow = static_cast<int64_t>(i);  // each step a little slower
    statistics.AddPhase(1, 7, Range(step.fwd_start - 10, 1000), true);
    statistics.AddPass(Pass::kForward, Range(step.fwd_start, 300));
    statistics.AddPass(Pass::kBackward, Range(step.bwd_start, 300));
    statistics.AddModule(1, 20, Range(step.fwd_start + 5, kFwd + grow));
    statistics.AddModule(1, 20, Range(step.fwd_start + 350, kBetween));
    statistics.AddModule(1, 20, Range(step.bwd_start + 5, kBwd + grow));
    expected_forward = kFwd + grow;
    expected_backward = kBwd + grow;
    expected_total = kFwd + kBwd + kBetween + 2 * grow;
  }
  const RankStepFigures figures = statistics.Finish();
  const PathStepFigures* module = Find(figures.modules, 20);
  ASSERT_NE(module, nullptr);
  ASSERT_EQ(module->buckets.size(), steps.size());
  const BucketSum& last = module->buckets.back();
  EXPECT_EQ(last.cpu_ns, expected_total);
  EXPECT_TRUE(last.forward.ran);
  EXPECT_EQ(last.forward.cpu_ns, expected_forward);
  EXPECT_TRUE(last.backward.ran);
  EXPECT_EQ(last.backward.cpu_ns, expected_backward);
  EXPECT_EQ(statistics.PassAt(steps[0].fwd_start - 1), Pass::kNone);  // spans cleared: none left
}

// Four steps of session 1, each with forward (path 8), backward (9) and optimizer (10) phases and
// a module, and then a fifth step that crashed mid-forward: the torch hooks closed its `forward`
// and its step at exit, so it has neither backward nor optimizer. Step starts are 10 us apart;
// each step lasts 2 us (the rest is data loading).
StepStatistics CrashedInFifthStep(std::optional<StepWindowRequest> window) {
  StepStatistics statistics(window);
  for (int64_t step = 0; step < 5; ++step) {
    const int64_t start = 10'000 * (step + 1);
    const bool crashed = step == 4;
    statistics.AddPhase(1, 8, Range(start + 10, 500), false);
    statistics.AddModule(1, 20, Range(start + 20, 400));
    if (!crashed) {
      statistics.AddPhase(1, 9, Range(start + 600, 1000), false);
      statistics.AddPhase(1, 10, Range(start + 1700, 200), false);
    }
    // The crashed step was closed at exit, long after its forward.
    statistics.AddPhase(1, 7, Range(start, crashed ? 90'000 : 2000), /*is_step=*/true);
  }
  return statistics;
}

TEST(StepStatisticsTest, TheLastStepOfASessionWithoutAPhaseEveryOtherStepRanDidNotFinish) {
  RankStepFigures figures = CrashedInFifthStep(StepWindowRequest{1, std::nullopt}).Finish();
  EXPECT_EQ(figures.steps_marked, 5);
  EXPECT_THAT(figures.unfinished_steps, ElementsAre(4));
  EXPECT_TRUE(figures.counted_steps.empty());
  EXPECT_EQ(figures.uncounted_steps, 3u) << "steps 1-3: the unfinished step is left out";
  const PathStepFigures* step = Find(figures.phases, 7);
  ASSERT_NE(step, nullptr);
  EXPECT_THAT(Buckets(*step), ElementsAre(1, 2, 3)) << "its 90 us step range enters no median";
  const PathStepFigures* module = Find(figures.modules, 20);
  ASSERT_NE(module, nullptr);
  EXPECT_THAT(Buckets(*module), ElementsAre(1, 2, 3));
  // Without a window too.
  figures = CrashedInFifthStep(std::nullopt).Finish();
  EXPECT_THAT(figures.unfinished_steps, ElementsAre(4));
  EXPECT_THAT(Buckets(*Find(figures.phases, 7)), ElementsAre(0, 1, 2, 3));
}

TEST(StepStatisticsTest, StepsThatRanEveryPhaseFinishedAndAOneStepSessionCannotTell) {
  RankStepFigures figures = FourSteps(std::nullopt).Finish();
  EXPECT_TRUE(figures.unfinished_steps.empty());
  StepStatistics lone(std::nullopt);
  lone.AddPhase(1, 8, Range(110, 50), false);
  lone.AddPhase(1, 7, Range(100, 900), true);
  EXPECT_TRUE(lone.Finish().unfinished_steps.empty());
  // A step ending a session early in a restarted rank: only its own session's steps count.
  StepStatistics restarted(std::nullopt);
  for (int64_t step = 0; step < 2; ++step) {
    restarted.AddPhase(1, 8, Range(1000 * step + 10, 50), false);
    restarted.AddPhase(1, 9, Range(1000 * step + 100, 50), false);
    restarted.AddPhase(1, 7, Range(1000 * step, 500), true);
  }
  restarted.AddPhase(2, 8, Range(5010, 50), false);  // the new session's one step
  restarted.AddPhase(2, 7, Range(5000, 500), true);
  EXPECT_TRUE(restarted.Finish().unfinished_steps.empty());
}

TEST(StepStatisticsTest, TheStepPeriodRunsFromOneStepStartToTheNextInTheSameSession) {
  RankStepFigures figures = CrashedInFifthStep(StepWindowRequest{1, std::nullopt}).Finish();
  // Steps 1, 2 and 3 each have a next step 10 us later (step 4 started, though it did not
  // finish); the unfinished step 4 has no period.
  EXPECT_THAT(figures.step_periods_ns, ElementsAre(10'000, 10'000, 10'000));
  StepStatistics two_sessions(std::nullopt);
  two_sessions.AddPhase(1, 7, Range(0, 100), true);
  two_sessions.AddPhase(1, 7, Range(300, 100), true);
  two_sessions.AddPhase(2, 7, Range(9000, 100), true);  // a restart: no period across it
  EXPECT_THAT(two_sessions.Finish().step_periods_ns, ElementsAre(300));
}

}  // namespace
}  // namespace flopscope::daemon
