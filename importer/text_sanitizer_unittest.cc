#include "importer/text_sanitizer.h"

#include <gtest/gtest.h>

#include <string>

namespace flopscope::importer {
namespace {

TEST(CleanTextTest, KeepsValidUtf8) {
  EXPECT_EQ(CleanText("Linear_0 \xC3\xA9\xE2\x82\xAC", 100), "Linear_0 \xC3\xA9\xE2\x82\xAC");
}

TEST(CleanTextTest, ReplacesIllFormedBytesAndNul) {
  EXPECT_EQ(CleanText(std::string("a\0b", 3), 100),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(CleanText("x\xFFy", 100), "x\xEF\xBF\xBDy");
  EXPECT_EQ(CleanText("\xED\xA0\x80", 100), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(CleanText("\xC0\xAF", 100), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong
}

TEST(CleanTextTest, CutsOnACharacterBoundary) {
  EXPECT_EQ(CleanText("ab\xE2\x82\xAC", 4), "ab");
  EXPECT_EQ(CleanText("abcdef", 3), "abc");
  // Only a bounded prefix is read: what starts before the limit is whole or left out.
  EXPECT_EQ(CleanText("abc\xF0\x9F\x98\x80", 5), "abc");
  EXPECT_EQ(CleanText("abc\xF0\x9F\x98\x80" "def", 7), "abc\xF0\x9F\x98\x80");
  EXPECT_EQ(CleanText(std::string(1 << 20, 'a') + "\xFF", 10), std::string(10, 'a'));
  // A replacement (3 bytes) that would cross the limit is left out too.
  EXPECT_EQ(CleanText("ab\xFF", 4), "ab");
}

}  // namespace
}  // namespace flopscope::importer
