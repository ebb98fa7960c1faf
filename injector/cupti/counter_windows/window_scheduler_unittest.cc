#include "injector/cupti/counter_windows/window_scheduler.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace flopscope::injector::cupti {
namespace {

using counters::MetricSetKind;

CounterSettings Settings(const char* text) {
  CounterSettings settings;
  std::string error;
  EXPECT_TRUE(ParseCounterWindows(text, &settings, &error)) << error;
  return settings;
}

// Runs steps 0..steps-1 and lists the windows as (first, last) from the opens and closes seen.
std::vector<std::pair<int64_t, int64_t>> RunSteps(WindowScheduler& scheduler, int64_t steps) {
  std::vector<std::pair<int64_t, int64_t>> windows;
  for (int64_t step = 0; step < steps; ++step) {
    if (std::optional<WindowPlan> plan = scheduler.StepBegins(step)) {
      EXPECT_EQ(plan->first_step, step);
      windows.emplace_back(step, plan->last_step);
    }
    if (scheduler.StepEnds(step)) {
      EXPECT_EQ(windows.back().second, step);
    }
  }
  return windows;
}

TEST(WindowSchedulerTest, AStepRangeIsOneWindow) {
  WindowScheduler scheduler(Settings("steps=3:4"));
  using W = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(RunSteps(scheduler, 10), (W{{3, 4}}));
}

TEST(WindowSchedulerTest, EveryCountsFromTheFirstMultiple) {
  WindowScheduler scheduler(Settings("every=500,steps=2"));
  using W = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(RunSteps(scheduler, 1600), (W{{500, 501}, {1000, 1001}, {1500, 1501}}));
  WindowScheduler single(Settings("every=3"));
  EXPECT_EQ(RunSteps(single, 10), (W{{3, 3}, {6, 6}, {9, 9}}));
}

TEST(WindowSchedulerTest, EnvironmentWindowsCarryTheirSetAndTrigger) {
  WindowScheduler scheduler(Settings("steps=2,set=full"));
  EXPECT_FALSE(scheduler.StepBegins(0).has_value());
  scheduler.StepEnds(0);
  scheduler.StepEnds(1);
  std::optional<WindowPlan> plan = scheduler.StepBegins(2);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->metric_set, MetricSetKind::kFull);
  EXPECT_EQ(plan->trigger, "env: steps=2,set=full");
  EXPECT_EQ(plan->control_id, 0u);
}

TEST(WindowSchedulerTest, WithoutStepMarksNothingEverOpens) {
  WindowScheduler scheduler(Settings("steps=0:5"));
  std::string refusal;
  ASSERT_TRUE(scheduler.Request(2, MetricSetKind::kCheap, 7, &refusal));
  // No StepBegins: neither the environment's window nor the requested one opens.
  EXPECT_EQ(scheduler.open_window(), nullptr);
  ASSERT_NE(scheduler.pending_request(), nullptr);
  EXPECT_EQ(scheduler.pending_steps(), 2);
}

TEST(WindowSchedulerTest, AnOnDemandWindowCountsTheNextSteps) {
  WindowScheduler scheduler(CounterSettings{});
  EXPECT_FALSE(scheduler.StepBegins(0).has_value());
  scheduler.StepEnds(0);
  std::string refusal;
  ASSERT_TRUE(scheduler.Request(3, MetricSetKind::kFull, 42, &refusal));
  std::optional<WindowPlan> plan = scheduler.StepBegins(1);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->first_step, 1);
  EXPECT_EQ(plan->last_step, 3);
  EXPECT_EQ(plan->metric_set, MetricSetKind::kFull);
  EXPECT_EQ(plan->trigger, "daemon: control 42");
  EXPECT_EQ(plan->control_id, 42u);
  EXPECT_FALSE(scheduler.StepEnds(1));
  EXPECT_FALSE(scheduler.StepBegins(2).has_value());  // inside the open window
  EXPECT_FALSE(scheduler.StepEnds(2));
  EXPECT_TRUE(scheduler.StepEnds(3));
  EXPECT_EQ(scheduler.open_window(), nullptr);
}

TEST(WindowSchedulerTest, OverlappingRequestsAreRefusedWithTheReason) {
  WindowScheduler scheduler(CounterSettings{});
  std::string refusal;
  ASSERT_TRUE(scheduler.Request(2, MetricSetKind::kCheap, 1, &refusal));
  EXPECT_FALSE(scheduler.Request(2, MetricSetKind::kCheap, 2, &refusal));
  EXPECT_EQ(refusal, "a counter window is already waiting for the next step (daemon: control 1)");
  scheduler.StepBegins(10);
  EXPECT_FALSE(scheduler.Request(1, MetricSetKind::kCheap, 3, &refusal));
  EXPECT_EQ(refusal, "a counter window is already open (steps 10-11, daemon: control 1)");
  EXPECT_FALSE(scheduler.Request(0, MetricSetKind::kCheap, 4, &refusal));
  scheduler.StepEnds(10);
  scheduler.StepBegins(11);
  EXPECT_TRUE(scheduler.StepEnds(11));
  EXPECT_TRUE(scheduler.Request(1, MetricSetKind::kCheap, 5, &refusal));  // free again
}

TEST(WindowSchedulerTest, AnEnvironmentWindowNeverOverlapsAnOpenOne) {
  WindowScheduler scheduler(Settings("steps=3:5"));
  std::string refusal;
  for (int64_t step = 0; step < 2; ++step) {
    scheduler.StepBegins(step);
    scheduler.StepEnds(step);
  }
  ASSERT_TRUE(scheduler.Request(2, MetricSetKind::kCheap, 9, &refusal));
  std::optional<WindowPlan> demanded = scheduler.StepBegins(2);  // the request: steps 2-3
  ASSERT_TRUE(demanded.has_value());
  EXPECT_EQ(demanded->last_step, 3);
  scheduler.StepEnds(2);
  EXPECT_FALSE(scheduler.StepBegins(3).has_value());  // step 3 is in the daemon's window
  EXPECT_TRUE(scheduler.StepEnds(3));
  // The environment's window gets what is left of its range.
  std::optional<WindowPlan> rest = scheduler.StepBegins(4);
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(rest->first_step, 4);
  EXPECT_EQ(rest->last_step, 5);
  EXPECT_EQ(rest->trigger, "env: steps=3:5");
}

TEST(WindowSchedulerTest, AbandonEndsTheOpenWindow) {
  WindowScheduler scheduler(Settings("steps=0:100"));
  ASSERT_TRUE(scheduler.StepBegins(0).has_value());
  EXPECT_TRUE(scheduler.Abandon());
  EXPECT_FALSE(scheduler.Abandon());
  EXPECT_EQ(scheduler.open_window(), nullptr);
}

}  // namespace
}  // namespace flopscope::injector::cupti
