#include "importer/text_sanitizer.h"

#include <gtest/gtest.h>

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
}

}  // namespace
}  // namespace flopscope::importer
