#include "injector/ranges/range_clock.h"

#include <gtest/gtest.h>

namespace flopscope::injector {
namespace {

TEST(RangeClockTest, RealtimeReadingsPassThrough) {
  RangeClock clock(RangeClock::Source::kRealtime);
  const int64_t before = RangeClock::RealtimeNs();
  const uint64_t raw = clock.Read();
  const int64_t after = RangeClock::RealtimeNs();
  clock.Calibrate();
  EXPECT_GE(clock.ToRealtimeNs(raw), before);
  EXPECT_LE(clock.ToRealtimeNs(raw), after);
}

TEST(RangeClockTest, TscReadingsConvertToRealtime) {
  if (RangeClock::Detect() != RangeClock::Source::kTsc) {
    GTEST_SKIP() << "the kernel does not keep time with an invariant TSC here";
  }
  RangeClock clock(RangeClock::Source::kTsc);
  const int64_t before = RangeClock::RealtimeNs();
  const uint64_t first = clock.Read();
  const uint64_t second = clock.Read();
  const int64_t after = RangeClock::RealtimeNs();
  clock.Calibrate();  // at least 2 ms after construction
  // The conversion is accurate to well under a microsecond; the slack absorbs calibration
  // jitter if the test is descheduled between reads.
  constexpr int64_t kSlackNs = 1000000;
  const int64_t first_ns = clock.ToRealtimeNs(first);
  EXPECT_GE(first_ns, before - kSlackNs);
  EXPECT_LE(first_ns, after + kSlackNs);
  EXPECT_LE(first_ns, clock.ToRealtimeNs(second));  // order kept
  const int64_t now = RangeClock::RealtimeNs();
  EXPECT_NEAR(static_cast<double>(clock.ToRealtimeNs(clock.Read())), static_cast<double>(now),
              static_cast<double>(kSlackNs));
}

}  // namespace
}  // namespace flopscope::injector
