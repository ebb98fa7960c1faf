#include "injector/ranges/step_tracker.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "injector/ranges/domain_registry.h"
#include "injector/ranges/path_table.h"
#include "injector/ranges/range_clock.h"
#include "injector/ranges/range_tracker.h"

namespace flopscope::injector {
namespace {

// Remembers the step events in order, as "begin 0", "end 0", ...
class EventLog : public StepListener {
 public:
  void OnStepBegin(int64_t step) noexcept override {
    events.push_back("begin " + std::to_string(step));
  }
  void OnStepEnd(int64_t step) noexcept override {
    events.push_back("end " + std::to_string(step));
  }
  std::vector<std::string> events;
};

TEST(StepTrackerTest, StepsAreNumberedFromZeroAndPhasesFollowTheInnermostRange) {
  StepTracker steps;
  EventLog log;
  steps.SetListener(&log);
  EXPECT_EQ(steps.Current().step, -1);
  steps.Opened("step", 10, 1);
  steps.Opened("forward", 11, 2);
  EXPECT_EQ(steps.Current().phase_path_id, 11u);
  EXPECT_EQ(steps.Current().step, 0);
  steps.Closed(2);
  EXPECT_EQ(steps.Current().phase_path_id, 10u);
  steps.Closed(1);
  EXPECT_EQ(steps.Current().phase_path_id, 0u);
  EXPECT_EQ(steps.Current().step, -1);
  steps.Opened("step", 10, 3);
  steps.Closed(3);
  EXPECT_EQ(log.events, (std::vector<std::string>{"begin 0", "end 0", "begin 1", "end 1"}));
  EXPECT_EQ(steps.steps_begun(), 2);
}

TEST(StepTrackerTest, OverlappingStepsOfTwoThreadsAreOneStep) {
  StepTracker steps;
  EventLog log;
  steps.SetListener(&log);
  steps.Opened("step", 10, 1);  // main thread
  steps.Opened("step", 20, 7);  // a worker's own step, while the main one is open
  steps.Opened("backward", 21, 8);
  steps.Closed(1);  // the main thread's step closes first
  EXPECT_EQ(steps.Current().step, 0);
  EXPECT_EQ(steps.Current().phase_path_id, 21u);  // the worker's backward, from any thread
  steps.Closed(8);
  steps.Closed(7);
  EXPECT_EQ(log.events, (std::vector<std::string>{"begin 0", "end 0"}));
}

TEST(StepTrackerTest, OtherNamesAndUnknownClosesAreNotSteps) {
  StepTracker steps;
  EventLog log;
  steps.SetListener(&log);
  steps.Opened("forward", 5, 1);
  steps.Opened("ProfilerStep#3", 6, 2);  // not the flopscope step range
  steps.Closed(99);                      // never opened: ignored
  steps.Closed(2);
  steps.Closed(1);
  EXPECT_TRUE(log.events.empty());
  EXPECT_EQ(steps.steps_begun(), 0);
}

// A range tracker and its step tracker. Deliberately leaked: a RangeTracker must outlive every
// thread that used it, and gtest's main thread outlives each test.
struct Tracked {
  Tracked()
      : clock(RangeClock::Source::kRealtime),
        buffers(16 << 20, &losses),
        tracker(&clock, &paths, &buffers, &losses) {
    steps.SetListener(&log);
    tracker.SetStepTracker(&steps);
  }
  LossCounters losses;
  RangeClock clock;
  DomainRegistry domains;
  PathTable paths;
  BufferRegistry buffers;
  RangeTracker tracker;
  StepTracker steps;
  EventLog log;
};

// The range tracker reports flopscope-domain ranges (push/pop and start/end) and nothing else,
// and stamps RangeEvent.counted from the flag at each close.
TEST(StepTrackerTest, RangeTrackerDrivesStepsAndCountedFlags) {
  Tracked& w = *new Tracked();
  const Domain* flopscope = w.domains.Create("flopscope");
  const Domain* modules = w.domains.Default();

  w.tracker.Push(modules, "Model");  // module ranges are not phases
  w.tracker.Push(flopscope, "step");
  EXPECT_EQ(w.log.events, (std::vector<std::string>{"begin 0"}));
  w.steps.SetRangesCounted(true);  // as a counter window opening at this step would
  const uint64_t forward = w.tracker.Start(flopscope, "forward");
  EXPECT_NE(w.steps.Current().phase_path_id, 0u);
  w.tracker.Push(modules, "fc");
  w.tracker.Pop(modules);           // closes inside the window: counted
  w.tracker.End(forward);           // start/end phases are followed too
  w.tracker.Pop(flopscope);         // the step's own pop is still counted
  w.steps.SetRangesCounted(false);  // the window closed at that pop
  EXPECT_EQ(w.log.events, (std::vector<std::string>{"begin 0", "end 0"}));
  w.tracker.Pop(modules);  // "Model" closes after the window

  RecordSet records;
  w.buffers.DrainAll(&records);
  ASSERT_EQ(records.ranges.size(), 4u);
  std::vector<bool> counted;
  for (const fs_range_event& range : records.ranges) counted.push_back(range.counted != 0);
  EXPECT_EQ(counted, (std::vector<bool>{true, true, true, false}));
}

TEST(StepTrackerTest, ConcurrentPhasesFromManyThreadsLeaveNothingOpen) {
  StepTracker steps;
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 4; ++t) {
    threads.emplace_back([&steps, t] {
      for (uint64_t i = 0; i < 1000; ++i) {
        const uint64_t id = t * 100000 + i * 2 + 1;
        steps.Opened("step", 1, id);
        steps.Opened("forward", 2, id + 1);
        steps.Closed(id + 1);
        steps.Closed(id);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(steps.Current().phase_path_id, 0u);
  EXPECT_EQ(steps.Current().step, -1);
  // Overlapping steps of several threads are one step of the process: between 1 and 4000.
  EXPECT_GE(steps.steps_begun(), 1);
  EXPECT_LE(steps.steps_begun(), 4000);
}

}  // namespace
}  // namespace flopscope::injector
