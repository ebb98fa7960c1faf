#include "importer/time_base.h"

#include <gtest/gtest.h>

namespace flopscope::importer {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'750'000'000);  // 2025-06-15
constexpr int64_t kSecond = 1'000'000'000;

TEST(ChooseTimeBaseTest, EpochTracesKeepTheirTimes) {
  const int64_t t = 1'700'000'000 * kSecond;
  absl::StatusOr<TimeBase> base = ChooseTimeBase(t, t + kSecond, 123, false, kNow);
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(base->offset_ns, 0);
}

TEST(ChooseTimeBaseTest, RelativeClocksUseBaseTimeNanoseconds) {
  const int64_t base_ns = 1'711'964'646 * kSecond;
  absl::StatusOr<TimeBase> base =
      ChooseTimeBase(4'458'676 * kSecond, 4'458'677 * kSecond, base_ns, false, kNow);
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(base->offset_ns, base_ns);
}

TEST(ChooseTimeBaseTest, RequiredBaseComesFirst) {
  const int64_t session = 1'696'392'839 * kSecond;
  absl::StatusOr<TimeBase> base = ChooseTimeBase(264'403'140, 600 * kSecond, session, true, kNow);
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(base->offset_ns, session);
}

TEST(ChooseTimeBaseTest, WithoutABaseTheAnchorKeepsRanksAligned) {
  absl::StatusOr<TimeBase> a = ChooseTimeBase(5 * kSecond, 9 * kSecond, std::nullopt, false, kNow);
  absl::StatusOr<TimeBase> b = ChooseTimeBase(7 * kSecond, 8 * kSecond, std::nullopt, false, kNow);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->offset_ns, kAnchorNs);
  EXPECT_EQ(a->offset_ns, b->offset_ns);
}

TEST(ChooseTimeBaseTest, BaseThatLeavesTheWindowIsNotUsed) {
  // A base in the future (a bad clock) would put the trace after `now`.
  absl::StatusOr<TimeBase> base =
      ChooseTimeBase(kSecond, 2 * kSecond, absl::ToUnixNanos(kNow) + kSecond, false, kNow);
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(base->offset_ns, kAnchorNs);
}

TEST(ChooseTimeBaseTest, FarOffTimesAreShiftedToTheAnchor) {
  const int64_t far = 4'000'000'000 * kSecond;  // year 2096
  absl::StatusOr<TimeBase> base = ChooseTimeBase(far, far + kSecond, std::nullopt, false, kNow);
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(far + base->offset_ns, kAnchorNs);
}

TEST(ChooseTimeBaseTest, SpansLongerThanTheWindowAreRefused) {
  EXPECT_FALSE(ChooseTimeBase(INT64_MIN / 2, INT64_MAX / 2, std::nullopt, false, kNow).ok());
}

}  // namespace
}  // namespace flopscope::importer
