#include "importer/micros_text.h"

#include <gtest/gtest.h>

namespace flopscope::importer {
namespace {

TEST(MicrosTextToNanosTest, KeepsNanosecondDigitsADoubleWouldLose) {
  EXPECT_EQ(MicrosTextToNanos("1712195495406752.797"), 1712195495406752797);
  EXPECT_EQ(MicrosTextToNanos("1428625731896.179"), 1428625731896179);
}

TEST(MicrosTextToNanosTest, IntegersFractionsAndRounding) {
  EXPECT_EQ(MicrosTextToNanos("42"), 42000);
  EXPECT_EQ(MicrosTextToNanos("0.5"), 500);
  EXPECT_EQ(MicrosTextToNanos("1.2345"), 1235);  // the fourth digit rounds half up
  EXPECT_EQ(MicrosTextToNanos("1.2344"), 1234);
  EXPECT_EQ(MicrosTextToNanos("-3.25"), -3250);
  EXPECT_EQ(MicrosTextToNanos("1.5e3"), 1500000);
}

TEST(MicrosTextToNanosTest, RejectsWhatIsNotANumber) {
  for (const char* text :
       {"", "-", "1.", ".5", "1x", "abc", "1.2.3", "\"12\"", "99999999999999999"}) {
    EXPECT_FALSE(MicrosTextToNanos(text).has_value()) << text;
  }
}

TEST(FindEventTimeTextTest, FindsTopLevelTsAndDurOnly) {
  const EventTimeText found = FindEventTimeText(
      R"({"args": {"ts": 1, "dur": 2}, "name": "a \"ts\": 9", "ts": 12.5, "dur": 3})");
  EXPECT_EQ(found.ts, "12.5");
  EXPECT_EQ(found.dur, "3");
}

TEST(FindEventTimeTextTest, AbsentOrNonScalarMembersAreEmpty) {
  const EventTimeText found = FindEventTimeText(R"({"ts": "12", "x": [1, {"dur": 4}]})");
  EXPECT_TRUE(found.ts.empty());
  EXPECT_TRUE(found.dur.empty());
}

}  // namespace
}  // namespace flopscope::importer
