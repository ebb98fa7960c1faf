#include "daemon/report/span_rollup.h"

#include <gtest/gtest.h>

#include <vector>

namespace flopscope::daemon {
namespace {

InstanceActivity Kernels(uint64_t path, int64_t first, int64_t last, int64_t busy) {
  return InstanceActivity{path, 1, first, last, busy};
}

const PathSpan* Find(const std::vector<PathSpan>& spans, uint64_t path) {
  for (const PathSpan& span : spans) {
    if (span.path_id == path) return &span;
  }
  return nullptr;
}

// layer (path 1, instance 10) holds attn (path 2, instance 11) and mlp (path 3, instance 12);
// layer launches one kernel of its own after mlp.
TEST(SpanRollupTest, AModuleSpanCoversItsChildrensKernels) {
  SpanRollup rollup;
  rollup.AddOccurrence(1, 11, Kernels(2, 100, 200, 80));
  rollup.AddOccurrence(1, 12, Kernels(3, 300, 450, 150));
  rollup.AddOccurrence(1, 10, Kernels(1, 500, 520, 20));
  rollup.AddRange(1, 11, 10, 2);  // children close first
  rollup.AddRange(1, 12, 10, 3);
  rollup.AddRange(1, 10, 0, 1);
  const std::vector<PathSpan> spans = rollup.Finish();
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(Find(spans, 2)->span_ns, 100);
  EXPECT_EQ(Find(spans, 2)->busy_ns, 80);
  EXPECT_EQ(Find(spans, 3)->span_ns, 150);
  EXPECT_EQ(Find(spans, 1)->span_ns, 420);  // 100 .. 520
  EXPECT_EQ(Find(spans, 1)->busy_ns, 250);  // 80 + 150 + 20
  EXPECT_EQ(Find(spans, 1)->occurrences, 1u);
}

TEST(SpanRollupTest, AnOccurrenceWithoutOwnKernelsTakesItsPathFromItsRangeEvent) {
  SpanRollup rollup;
  rollup.AddOccurrence(1, 21, Kernels(5, 1000, 1100, 100));
  rollup.AddRange(1, 21, 20, 5);
  rollup.AddRange(1, 20, 0, 4);  // a container module with no kernel of its own
  rollup.AddRange(1, 99, 0, 6);  // a module with no kernels at all: no row
  const std::vector<PathSpan> spans = rollup.Finish();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(Find(spans, 4)->span_ns, 100);
  EXPECT_EQ(Find(spans, 6), nullptr);
}

TEST(SpanRollupTest, SpansAddUpOverOccurrencesNotOverTheGapsBetweenThem) {
  SpanRollup rollup;
  rollup.AddOccurrence(1, 31, Kernels(7, 0, 10, 10));
  rollup.AddOccurrence(1, 32, Kernels(7, 1000, 1030, 30));
  rollup.AddRange(1, 31, 0, 7);
  rollup.AddRange(1, 32, 0, 7);
  const std::vector<PathSpan> spans = rollup.Finish();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].span_ns, 40);
  EXPECT_EQ(spans[0].occurrences, 2u);
}

TEST(SpanRollupTest, ConcurrentChildrenNeverMakeBusyExceedTheSpan) {
  SpanRollup rollup;
  rollup.AddOccurrence(1, 41, Kernels(2, 0, 100, 100));  // two streams, same time
  rollup.AddOccurrence(1, 42, Kernels(3, 0, 100, 100));
  rollup.AddRange(1, 41, 40, 2);
  rollup.AddRange(1, 42, 40, 3);
  rollup.AddRange(1, 40, 0, 1);
  const std::vector<PathSpan> spans = rollup.Finish();
  EXPECT_EQ(Find(spans, 1)->span_ns, 100);
  EXPECT_EQ(Find(spans, 1)->busy_ns, 100);
}

// A parent_instance_id naming no range event (the parent never closed, or the producer never
// sent it): the child counts as a root, and its kernels go to no path of their own.
TEST(SpanRollupTest, AnOccurrenceWhoseParentNeverCameCountsAsARoot) {
  SpanRollup rollup;
  rollup.AddOccurrence(1, 61, Kernels(2, 100, 180, 70));
  EXPECT_TRUE(rollup.AddRange(1, 61, 60, 2).has_value());  // parent 60: no event ever comes
  std::vector<OccurrenceSpan> unclosed;
  const std::vector<PathSpan> spans = rollup.Finish(&unclosed);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].path_id, 2u);
  EXPECT_EQ(spans[0].span_ns, 80);
  EXPECT_EQ(spans[0].busy_ns, 70);
  EXPECT_EQ(spans[0].occurrences, 1u);
  EXPECT_TRUE(unclosed.empty()) << "the missing parent has no path to count on";
}

TEST(SpanRollupTest, UnclosedAndGraphOccurrencesCountOnTheirOwnPath) {
  SpanRollup rollup;
  rollup.AddOccurrence(1, 51, Kernels(8, 0, 50, 50));                       // range never closed
  rollup.AddOccurrence(1, (uint64_t{1} << 63) | 9, Kernels(9, 0, 70, 60));  // graph replay
  const std::vector<PathSpan> spans = rollup.Finish();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(Find(spans, 8)->span_ns, 50);
  EXPECT_EQ(Find(spans, 9)->busy_ns, 60);
}

TEST(SpanRollupTest, SessionsKeepTheirInstanceIdsApart) {
  SpanRollup rollup;
  rollup.AddOccurrence(1, 5, Kernels(1, 0, 10, 10));
  rollup.AddOccurrence(2, 5, Kernels(1, 0, 30, 30));
  rollup.AddRange(1, 5, 0, 1);
  rollup.AddRange(2, 5, 0, 1);
  const std::vector<PathSpan> spans = rollup.Finish();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].sid, 1);
  EXPECT_EQ(spans[0].span_ns, 10);
  EXPECT_EQ(spans[1].sid, 2);
  EXPECT_EQ(spans[1].span_ns, 30);
}

}  // namespace
}  // namespace flopscope::daemon
