#include "common/utf8.h"

#include <gtest/gtest.h>

namespace flopscope::injector {
namespace {

std::string Sanitized(std::string_view text) {
  std::string out;
  AppendSanitizedUtf8(text, &out);
  return out;
}

std::string FromWide(const wchar_t* text) {
  std::string out;
  AppendWideAsUtf8(text, &out);
  return out;
}

TEST(Utf8Test, ValidTextPassesUnchanged) {
  EXPECT_EQ(Sanitized("Model/layer.0"), "Model/layer.0");
  EXPECT_EQ(Sanitized("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
}

TEST(Utf8Test, InvalidBytesBecomeReplacementCharacters) {
  EXPECT_EQ(Sanitized("a\xFFz"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(Sanitized("\xC3"), "\xEF\xBF\xBD");                  // truncated sequence
  EXPECT_EQ(Sanitized("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
  EXPECT_EQ(Sanitized("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
}

TEST(Utf8Test, WideStringsAreEncoded) {
  EXPECT_EQ(FromWide(L"attn"), "attn");
  EXPECT_EQ(FromWide(L"\u00e9\u20ac\U0001F600"), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  const wchar_t bad[] = {L'a', static_cast<wchar_t>(0xD800), static_cast<wchar_t>(0x110000), 0};
  EXPECT_EQ(FromWide(bad), "a\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(FromWide(nullptr), "");
}

TEST(Utf8Test, TruncationKeepsWholeSequences) {
  std::string text = "ab\xE2\x82\xAC";  // "ab€"
  TruncateUtf8(4, &text);
  EXPECT_EQ(text, "ab");
  text = "abc";
  TruncateUtf8(10, &text);
  EXPECT_EQ(text, "abc");
}

}  // namespace
}  // namespace flopscope::injector
