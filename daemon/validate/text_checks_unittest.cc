#include "daemon/validate/text_checks.h"

#include <gtest/gtest.h>

#include <string>

#include "common/utf8.h"  // the UTF-8 rule TextProblem applies

namespace flopscope::daemon {
namespace {

TEST(Utf8Test, AcceptsWellFormedText) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("layer.0/attention"));
  EXPECT_TRUE(IsValidUtf8("\xc3\xbc"));          // ü
  EXPECT_TRUE(IsValidUtf8("\xe2\x82\xac"));      // €
  EXPECT_TRUE(IsValidUtf8("\xf0\x9f\x94\xa5"));  // U+1F525
  EXPECT_TRUE(IsValidUtf8("\xf4\x8f\xbf\xbf"));  // U+10FFFF, the last code point
}

TEST(Utf8Test, RejectsMalformedText) {
  EXPECT_FALSE(IsValidUtf8("\x80"));              // lone continuation byte
  EXPECT_FALSE(IsValidUtf8("\xc3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\xc3\x28"));          // bad continuation
  EXPECT_FALSE(IsValidUtf8("\xc0\x80"));          // overlong NUL
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));      // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // U+110000
  EXPECT_FALSE(IsValidUtf8("\xff"));
}

TEST(TextProblemTest, NamesEachProblem) {
  EXPECT_EQ(TextProblem("ok", 10, EmptyText::kRejected), "");
  EXPECT_EQ(TextProblem("", 10, EmptyText::kAllowed), "");
  EXPECT_EQ(TextProblem("", 10, EmptyText::kRejected), "is empty");
  EXPECT_EQ(TextProblem("12345678901", 10, EmptyText::kAllowed), "is 11 bytes long (at most 10)");
  EXPECT_EQ(TextProblem(std::string("a\0b", 3), 10, EmptyText::kAllowed), "holds a NUL byte");
  EXPECT_EQ(TextProblem("\xff", 10, EmptyText::kAllowed), "is not valid UTF-8");
}

}  // namespace
}  // namespace flopscope::daemon
