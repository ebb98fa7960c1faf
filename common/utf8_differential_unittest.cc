// Differential test of common/utf8 against a small reference decoder written here in a different
// way (decode the code point arithmetically, then check its range), over hand-picked and seeded
// random bytes. When this file landed it compared the four decoders the tree then had (injector,
// daemon, importer, client JSON writer) with common/utf8 over the same inputs; they agreed, and
// they were replaced by it.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/utf8.h"

namespace flopscope {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

struct Decoded {
  size_t length = 0;  // 0: ill-formed at this position
  char32_t code_point = 0;
};

// RFC 3629 by arithmetic: length from the lead's high bits, value from the payload bits, then
// reject overlong forms, surrogates and values past U+10FFFF.
Decoded ReferenceDecode(std::string_view text) {
  if (text.empty()) return {};
  const auto lead = static_cast<uint8_t>(text[0]);
  if (lead < 0x80) return {1, lead};
  int length = 0;
  while (length < 8 && (lead & (0x80 >> length)) != 0) ++length;
  if (length < 2 || length > 4 || text.size() < static_cast<size_t>(length)) return {};
  char32_t cp = lead & (0xFF >> (length + 1));
  for (int k = 1; k < length; ++k) {
    const auto byte = static_cast<uint8_t>(text[k]);
    if (byte >> 6 != 2) return {};
    cp = (cp << 6) | (byte & 0x3F);
  }
  const char32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < smallest[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {};
  return {static_cast<size_t>(length), cp};
}

std::string ReferenceSanitized(std::string_view text, bool printable) {
  std::string out;
  while (!text.empty()) {
    const Decoded d = ReferenceDecode(text);
    const bool control =
        d.length > 0 && (d.code_point < 0x20 || (d.code_point >= 0x7F && d.code_point < 0xA0));
    if (printable && d.code_point == '\t' && d.length == 1) {
      out += ' ';
    } else if (d.length == 0 || (printable && control)) {
      out += kReplacement;
    } else {
      out += text.substr(0, d.length);
    }
    text.remove_prefix(d.length == 0 ? 1 : d.length);
  }
  return out;
}

std::vector<std::string> Inputs() {
  std::vector<std::string> inputs = {"",
                                     "plain",
                                     std::string("a\0b", 3),
                                     "\xC3\xA9",
                                     "\xE2\x82\xAC",
                                     "\xF0\x9F\x98\x80",
                                     "\xF4\x8F\xBF\xBF",
                                     "\x80",
                                     "\xBF",
                                     "\xC0\x80",
                                     "\xC1\xBF",
                                     "\xE0\x80\xAF",
                                     "\xE0\x9F\xBF",
                                     "\xF0\x8F\xBF\xBF",
                                     "\xED\xA0\x80",
                                     "\xED\xBF\xBF",
                                     "\xED\x9F\xBF",
                                     "\xF4\x90\x80\x80",
                                     "\xF5\x80\x80\x80",
                                     "\xF8\x88\x80\x80\x80",
                                     "\xFE",
                                     "\xFF",
                                     "\xC3",
                                     "\xE2\x82",
                                     "\xF0\x9F\x98",
                                     "\xC3\x28",
                                     "\xE2\x28\xA1",
                                     "x\xF0\x9F\x98",
                                     "\x1B[31mred\x1B[0m\n",
                                     "\xC2\x9B"
                                     "31m",
                                     "tab\there",
                                     "\x7F\xC2\x80\xC2\x9F\xC2\xA0"};
  std::mt19937 generator(13);  // fixed seed: the same bytes every run
  const unsigned char interesting[] = {0x00, 0x09, 0x1B, 0x41, 0x7F, 0x80, 0x9F, 0xA0, 0xBF, 0xC0,
                                       0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF};
  for (int n = 0; n < 20000; ++n) {
    std::string text(generator() % 12, '\0');
    for (char& c : text) {
      const unsigned pick = generator();
      c = static_cast<char>(pick % 2 == 0 ? interesting[(pick >> 1) % sizeof interesting]
                                          : (pick >> 1) & 0xFF);
    }
    inputs.push_back(text);
  }
  return inputs;
}

TEST(Utf8DifferentialTest, AgreesWithTheReferenceDecoder) {
  for (const std::string& text : Inputs()) {
    SCOPED_TRACE(testing::PrintToString(text));
    bool valid = true;
    for (size_t i = 0; i < text.size(); ++i) {
      const std::string_view rest = std::string_view(text).substr(i);
      EXPECT_EQ(Utf8SequenceLength(rest), ReferenceDecode(rest).length) << "at " << i;
    }
    for (std::string_view rest = text; !rest.empty();) {
      const size_t length = ReferenceDecode(rest).length;
      valid = valid && length > 0;
      rest.remove_prefix(length == 0 ? 1 : length);
    }
    EXPECT_EQ(IsValidUtf8(text), valid);
    std::string sanitized;
    AppendSanitizedUtf8(text, &sanitized);
    EXPECT_EQ(sanitized, ReferenceSanitized(text, false));
    EXPECT_TRUE(IsValidUtf8(sanitized));
    const std::string printable = PrintableForTerminal(text);
    EXPECT_EQ(printable, ReferenceSanitized(text, true));
    EXPECT_TRUE(IsValidUtf8(printable));
    for (size_t max = 0; max <= sanitized.size(); ++max) {
      std::string cut = sanitized;
      TruncateUtf8(max, &cut);
      EXPECT_LE(cut.size(), max);
      EXPECT_EQ(sanitized.compare(0, cut.size(), cut), 0);
      EXPECT_TRUE(IsValidUtf8(cut)) << "cut at " << max;
      // Maximal: the next whole character would not have fit.
      if (cut.size() < sanitized.size()) {
        EXPECT_GT(
            cut.size() + ReferenceDecode(std::string_view(sanitized).substr(cut.size())).length,
            max);
      }
    }
  }
}

}  // namespace
}  // namespace flopscope
