#include "importer/thread_timeline.h"

#include <gtest/gtest.h>

namespace flopscope::importer {
namespace {

TEST(ThreadTimelineTest, InnermostOnTheRightThread) {
  ThreadTimeline timeline;
  const int64_t outer = static_cast<int64_t>(timeline.Add(1, 0, 100));
  const int64_t first = static_cast<int64_t>(timeline.Add(1, 10, 20));
  const int64_t second = static_cast<int64_t>(timeline.Add(1, 30, 40));
  const int64_t other = static_cast<int64_t>(timeline.Add(2, 0, 1000));
  const std::vector<int64_t> found = timeline.Innermost(
      {{1, 15}, {1, 25}, {1, 35}, {1, 100}, {1, 101}, {2, 15}, {3, 15}, {1, 10}, {1, 20}});
  EXPECT_EQ(found,
            (std::vector<int64_t>{first, outer, second, outer, -1, other, -1, first, first}));
}

TEST(ThreadTimelineTest, OverlappingRangesResolveToTheLatestStarted) {
  ThreadTimeline timeline;
  const int64_t a = static_cast<int64_t>(timeline.Add(1, 0, 50));
  const int64_t b = static_cast<int64_t>(timeline.Add(1, 40, 90));  // overruns a
  EXPECT_EQ(timeline.Innermost({{1, 45}, {1, 60}, {1, 30}}), (std::vector<int64_t>{b, b, a}));
}

TEST(ThreadTimelineTest, SameStartPrefersTheOneAddedLater) {
  ThreadTimeline timeline;
  timeline.Add(1, 0, 100);
  const int64_t inner = static_cast<int64_t>(timeline.Add(1, 0, 50));
  EXPECT_EQ(timeline.Innermost({{1, 0}}), std::vector<int64_t>{inner});
}

}  // namespace
}  // namespace flopscope::importer
