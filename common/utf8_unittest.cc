#include "common/utf8.h"

#include <gtest/gtest.h>

namespace flopscope {
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

TEST(Utf8Test, SequenceLengthOfEachForm) {
  EXPECT_EQ(Utf8SequenceLength(""), 0u);
  EXPECT_EQ(Utf8SequenceLength(std::string_view("\0", 1)), 1u);  // NUL is well-formed
  EXPECT_EQ(Utf8SequenceLength("a"), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xC3\xA9"), 2u);
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82\xACtail"), 3u);
  EXPECT_EQ(Utf8SequenceLength("\xF4\x8F\xBF\xBF"), 4u);  // U+10FFFF, the last code point
  EXPECT_EQ(Utf8SequenceLength("\x80"), 0u);              // stray continuation
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82"), 0u);          // truncated
  EXPECT_EQ(Utf8SequenceLength("\xC0\x80"), 0u);          // overlong NUL
  EXPECT_EQ(Utf8SequenceLength("\xED\xA0\x80"), 0u);      // surrogate U+D800
  EXPECT_EQ(Utf8SequenceLength("\xF4\x90\x80\x80"), 0u);  // U+110000
}

TEST(Utf8Test, Validity) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("layer.0/attention \xC3\xBC \xF0\x9F\x94\xA5"));
  EXPECT_FALSE(IsValidUtf8("ok\xFF"));
  EXPECT_FALSE(IsValidUtf8("\xC3\x28"));  // bad continuation
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

TEST(Utf8Test, PrintableForTerminalNeutralisesControls) {
  EXPECT_EQ(PrintableForTerminal("Net/encoder \xC3\xA9"), "Net/encoder \xC3\xA9");
  // ESC of a colour sequence, a newline, BEL, DEL and the C1 CSI (U+009B) each become U+FFFD.
  EXPECT_EQ(PrintableForTerminal("a\x1B[31mb\nc\x07\x7F\xC2\x9B"),
            "a\xEF\xBF\xBD[31mb\xEF\xBF\xBD"
            "c\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(PrintableForTerminal(std::string_view("a\0b", 3)),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(PrintableForTerminal("a\tb"), "a b");                           // one column
  EXPECT_EQ(PrintableForTerminal("\xC2\xA0\xFF"), "\xC2\xA0\xEF\xBF\xBD");  // NBSP stays
}

}  // namespace
}  // namespace flopscope
