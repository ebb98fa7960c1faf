#include "injector/cupti/counter_windows/launch_ordinals.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace flopscope::injector::cupti {
namespace {

LaunchMark Mark(uint64_t correlation_id) {
  LaunchMark mark;
  mark.correlation_id = correlation_id;
  return mark;
}

// `n` launches, each leaving the driver before the next enters.
LaunchOrdinals::Pass Sequential(uint64_t n) {
  LaunchOrdinals ordinals;
  for (uint64_t id = 1; id <= n; ++id) {
    ordinals.Enter(Mark(id), false);
    ordinals.Exit(id, false);
  }
  return ordinals.Take();
}

std::vector<std::string> Names(size_t n, size_t first = 0) {
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back(std::to_string(first + i));
  return names;
}

using Pairs = std::vector<std::pair<size_t, size_t>>;

TEST(PairRangesTest, EqualCountsPairExactly) {
  const LaunchOrdinals::Pass pass = Sequential(4);
  const Pairing pairing = PairRanges(pass, 4, 0, Names(4, 100));
  EXPECT_EQ(pairing.pairs, (Pairs{{0, 0}, {1, 1}, {2, 2}, {3, 3}}));
  EXPECT_EQ(pairing.unmatched, 0u);
  EXPECT_EQ(pairing.problem, "");
  EXPECT_EQ(pass.entries[2].mark.correlation_id, 3u);  // ordinal order is launch order
}

TEST(PairRangesTest, MoreRangesThanLaunchesPairNothing) {
  const Pairing pairing = PairRanges(Sequential(3), 4, 0, Names(4));
  EXPECT_TRUE(pairing.pairs.empty());
  EXPECT_EQ(pairing.unmatched, 4u);
  EXPECT_EQ(pairing.problem, "4 counter ranges for 3 launches");
}

TEST(PairRangesTest, FewerRangesThanLaunchesPairNothing) {
  const Pairing pairing = PairRanges(Sequential(5), 2, 0, Names(2));
  EXPECT_TRUE(pairing.pairs.empty());
  EXPECT_EQ(pairing.unmatched, 5u);
}

TEST(PairRangesTest, DroppedRangesPairNothingEvenWhenTheCountsLookRight) {
  // 3 ranges kept + 1 dropped for 4 launches: which one was dropped is unknown.
  const Pairing pairing = PairRanges(Sequential(4), 3, 1, Names(3));
  EXPECT_TRUE(pairing.pairs.empty());
  EXPECT_EQ(pairing.unmatched, 4u);
  EXPECT_EQ(pairing.problem, "CUPTI dropped 1 counter ranges");
}

TEST(PairRangesTest, ASkipInTheRangeNamesPairsNothing) {
  const Pairing pairing = PairRanges(Sequential(3), 3, 0, {"10", "11", "13"});
  EXPECT_TRUE(pairing.pairs.empty());
  EXPECT_EQ(pairing.unmatched, 3u);
  EXPECT_NE(pairing.problem.find("skip from 11 to 13"), std::string::npos);
  // Names that are not ordinals say nothing either way.
  EXPECT_EQ(PairRanges(Sequential(2), 2, 0, {"a", "b"}).pairs.size(), 2u);
}

TEST(PairRangesTest, OverlappingLaunchesAreLeftOutAndTheRestPair) {
  LaunchOrdinals ordinals;
  ordinals.Enter(Mark(1), false);
  ordinals.Exit(1, false);
  ordinals.Enter(Mark(2), false);  // thread A inside the driver...
  ordinals.Enter(Mark(3), false);  // ...when thread B enters: their order is unknown
  ordinals.Exit(2, false);
  ordinals.Exit(3, false);
  ordinals.Enter(Mark(4), false);
  ordinals.Exit(4, false);
  const LaunchOrdinals::Pass pass = ordinals.Take();
  EXPECT_TRUE(pass.taint.empty());
  const Pairing pairing = PairRanges(pass, 4, 0, Names(4));
  EXPECT_EQ(pairing.pairs, (Pairs{{0, 0}, {3, 3}}));
  EXPECT_EQ(pairing.unmatched, 2u);
  EXPECT_NE(pairing.problem.find("2 launches overlapped"), std::string::npos);
}

TEST(PairRangesTest, AFailedLaunchTaintsItsPass) {
  LaunchOrdinals ordinals;
  ordinals.Enter(Mark(1), false);
  ordinals.Exit(1, /*failed=*/true);
  ordinals.Enter(Mark(2), false);
  ordinals.Exit(2, false);
  const LaunchOrdinals::Pass pass = ordinals.Take();
  EXPECT_EQ(pass.taint, "a launch in the pass failed");
  const Pairing pairing = PairRanges(pass, 2, 0, Names(2));
  EXPECT_TRUE(pairing.pairs.empty());
  EXPECT_EQ(pairing.unmatched, 2u);
  EXPECT_EQ(pairing.problem, "a launch in the pass failed");
}

TEST(PairRangesTest, ALaunchInFlightAtTheCutTaintsBothPasses) {
  LaunchOrdinals ordinals;
  ordinals.Enter(Mark(1), false);
  ordinals.Exit(1, false);
  ordinals.Enter(Mark(2), false);  // still inside the driver when the pass ends
  const LaunchOrdinals::Pass first = ordinals.Take();
  EXPECT_FALSE(first.taint.empty());
  ordinals.Exit(2, /*failed=*/true);  // a failure of an earlier pass's launch: nothing new
  ordinals.Enter(Mark(3), false);
  ordinals.Exit(3, false);
  const LaunchOrdinals::Pass second = ordinals.Take();
  EXPECT_EQ(second.taint, "a launch was inside the driver when the pass began");
  EXPECT_EQ(second.entries.size(), 1u);
  EXPECT_TRUE(ordinals.Take().taint.empty());  // and the one after is clean
}

TEST(PairRangesTest, AGraphLaunchAloneOwnsEveryRangeOfItsPass) {
  LaunchOrdinals ordinals;
  ordinals.Enter(Mark(9), /*graph=*/true);
  ordinals.Exit(9, false);
  EXPECT_TRUE(ordinals.has_graph());
  const LaunchOrdinals::Pass pass = ordinals.Take();
  const Pairing pairing = PairRanges(pass, 5, 0, Names(5));
  EXPECT_TRUE(pairing.graph_sum);
  EXPECT_TRUE(pairing.pairs.empty());
  EXPECT_EQ(pairing.unmatched, 0u);
  const Pairing empty = PairRanges(pass, 0, 0, {});
  EXPECT_FALSE(empty.graph_sum);
  EXPECT_EQ(empty.unmatched, 1u);
}

TEST(PairRangesTest, AGraphLaunchSharingItsPassPairsNothing) {
  LaunchOrdinals ordinals;
  ordinals.Enter(Mark(1), false);
  ordinals.Exit(1, false);
  ordinals.Enter(Mark(2), true);
  ordinals.Exit(2, false);
  const Pairing pairing = PairRanges(ordinals.Take(), 2, 0, Names(2));
  EXPECT_FALSE(pairing.graph_sum);
  EXPECT_TRUE(pairing.pairs.empty());
  EXPECT_EQ(pairing.unmatched, 2u);
}

TEST(PairRangesTest, AnEmptyPassIsFine) {
  const Pairing pairing = PairRanges(Sequential(0), 0, 0, {});
  EXPECT_TRUE(pairing.pairs.empty());
  EXPECT_EQ(pairing.unmatched, 0u);
  EXPECT_EQ(pairing.problem, "");
}

TEST(LaunchOrdinalsTest, ACapturedLaunchIsWithdrawnAndTheLaterOrdinalsMoveDown) {
  LaunchOrdinals ordinals;
  ordinals.Enter(Mark(1), false);
  ordinals.Exit(1, false);
  EXPECT_EQ(ordinals.Enter(Mark(2), false), 1u);  // captured into a graph: no kernel runs
  EXPECT_EQ(ordinals.Enter(Mark(3), false), 2u);  // another thread's, while 2 is in the driver
  EXPECT_TRUE(ordinals.Withdraw(2));
  EXPECT_FALSE(ordinals.Withdraw(2));
  ordinals.Exit(2, false);  // finds nothing: no taint for a launch that has no ordinal
  ordinals.Exit(3, false);
  EXPECT_EQ(ordinals.size(), 2u);
  const LaunchOrdinals::Pass pass = ordinals.Take();
  EXPECT_EQ(pass.taint, "");
  ASSERT_EQ(pass.entries.size(), 2u);
  EXPECT_EQ(pass.entries[0].mark.correlation_id, 1u);
  EXPECT_EQ(pass.entries[1].mark.correlation_id, 3u);
  // 3 overlapped 2 inside the driver: still marked, since its order was unknown when it entered.
  EXPECT_TRUE(pass.entries[1].ambiguous);
  EXPECT_FALSE(ordinals.Withdraw(1));  // left the driver long ago
}

TEST(LaunchOrdinalsTest, ALaunchOfAnEarlierPassCannotBeWithdrawn) {
  LaunchOrdinals ordinals;
  ordinals.Enter(Mark(1), false);
  ordinals.Take();  // 1 was in flight when the pass ended
  EXPECT_FALSE(ordinals.Withdraw(1));
  EXPECT_EQ(ordinals.taint(), "a launch was inside the driver when the pass began");
}

TEST(LaunchOrdinalsTest, APassResumedAfterThePauseIsCleanOnceTheDriverIsEmpty) {
  LaunchOrdinals ordinals;
  ordinals.Enter(Mark(1), false);
  EXPECT_EQ(ordinals.Take().taint, "a launch was inside the driver when the pass ended");
  ordinals.Resumed();  // 1 is still inside: it could still land in the next pass
  EXPECT_EQ(ordinals.taint(), "a launch was inside the driver when the pass began");
  ordinals.Exit(1, false);
  ordinals.Resumed();
  EXPECT_EQ(ordinals.taint(), "");
}

}  // namespace
}  // namespace flopscope::injector::cupti
