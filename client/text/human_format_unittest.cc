#include "client/text/human_format.h"

#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

TEST(FormatDurationTest, PicksTheUnitAndThreeSignificantDigits) {
  EXPECT_EQ(FormatDuration(0), "0 ns");
  EXPECT_EQ(FormatDuration(950), "950 ns");
  EXPECT_EQ(FormatDuration(1'234), "1.23 us");
  EXPECT_EQ(FormatDuration(12'345'678), "12.3 ms");
  EXPECT_EQ(FormatDuration(123'456'789), "123 ms");
  EXPECT_EQ(FormatDuration(999'600), "1.00 ms");  // rounds up into the next unit
  EXPECT_EQ(FormatDuration(12'345'000'000), "12.3 s");
  EXPECT_EQ(FormatDuration(4'000'000'000'000), "4000 s");
  EXPECT_EQ(FormatDuration(-1'500'000), "-1.50 ms");
}

TEST(FormatCountTest, UsesPowersOfAThousand) {
  EXPECT_EQ(FormatCount(0), "0");
  EXPECT_EQ(FormatCount(999), "999");
  EXPECT_EQ(FormatCount(1'234), "1.23 K");
  EXPECT_EQ(FormatCount(125'000'000), "125 M");
  EXPECT_EQ(FormatCount(2.5e12), "2.50 T");
  EXPECT_EQ(FormatCount(7e18), "7000 P");
}

TEST(FormatBytesTest, UsesPowersOf1024) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(999), "999 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{20} << 30), "20.0 GiB");
}

TEST(FormatTimestampTest, FormatsInTheGivenZoneAndMarksUnknown) {
  EXPECT_EQ(FormatTimestamp(1'714'564'803'000'000'000, absl::UTCTimeZone()), "2024-05-01 12:00:03");
  EXPECT_EQ(FormatTimestamp(0, absl::UTCTimeZone()), "-");
}

}  // namespace
}  // namespace flopscope::client
