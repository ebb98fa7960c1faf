#include "common/json/json_writer.h"

#include <cstdint>
#include <limits>
#include <string>

#include "client/testing/json_parse_for_test.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using testing::FlattenJson;

TEST(JsonWriterQuoteTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonWriter::Quote("plain"), "\"plain\"");
  EXPECT_EQ(JsonWriter::Quote("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(JsonWriter::Quote("a\\b"), "\"a\\\\b\"");
  EXPECT_EQ(JsonWriter::Quote("\b\f\n\r\t"), "\"\\b\\f\\n\\r\\t\"");
  EXPECT_EQ(JsonWriter::Quote(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(JsonWriter::Quote(std::string("a\0b", 3)), "\"a\\u0000b\"");
  // '/' and DEL need no escape.
  EXPECT_EQ(JsonWriter::Quote("a/b\x7f"), "\"a/b\x7f\"");
}

TEST(JsonWriterQuoteTest, KeepsValidUtf8) {
  EXPECT_EQ(JsonWriter::Quote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");            // é
  EXPECT_EQ(JsonWriter::Quote("\xe2\x9c\x93"), "\"\xe2\x9c\x93\"");          // ✓
  EXPECT_EQ(JsonWriter::Quote("\xf0\x9f\x9a\x80"), "\"\xf0\x9f\x9a\x80\"");  // 🚀
}

TEST(JsonWriterQuoteTest, ReplacesInvalidUtf8) {
  EXPECT_EQ(JsonWriter::Quote("a\xff"
                              "b"),
            "\"a\\ufffdb\"");                                                 // not a lead byte
  EXPECT_EQ(JsonWriter::Quote("\xc3"), "\"\\ufffd\"");                        // truncated
  EXPECT_EQ(JsonWriter::Quote("\xc0\x80"), "\"\\ufffd\\ufffd\"");             // overlong NUL
  EXPECT_EQ(JsonWriter::Quote("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // surrogate
  EXPECT_EQ(JsonWriter::Quote("\xf4\x90\x80\x80"),
            "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // above U+10FFFF
}

TEST(JsonWriterTest, WritesCompactDocuments) {
  JsonWriter json(0);
  json.BeginObject();
  json.Key("a").Int(-1);
  json.Key("b").BeginArray().Uint(1).Bool(true).Null().String("x").EndArray();
  json.Key("c").BeginObject().EndObject();
  json.Key("d").BeginArray().EndArray();
  json.EndObject();
  EXPECT_EQ(json.Finish(), "{\"a\":-1,\"b\":[1,true,null,\"x\"],\"c\":{},\"d\":[]}\n");
}

TEST(JsonWriterTest, IndentsNestedContainers) {
  JsonWriter json(2);
  json.BeginObject().Key("list").BeginArray().Int(1).Int(2).EndArray().EndObject();
  EXPECT_EQ(json.Finish(), "{\n  \"list\": [\n    1,\n    2\n  ]\n}\n");
}

TEST(JsonWriterTest, WritesExtremeIntegersExactly) {
  JsonWriter json(0);
  json.BeginArray()
      .Int(std::numeric_limits<int64_t>::min())
      .Uint(std::numeric_limits<uint64_t>::max())
      .EndArray();
  EXPECT_EQ(json.Finish(), "[-9223372036854775808,18446744073709551615]\n");
}

TEST(JsonWriterTest, WritesShortestRoundTripDoublesAndNullForNonFinite) {
  JsonWriter json(0);
  json.BeginArray()
      .Double(0.1)
      .Double(2.5e12)
      .Double(-0.0)
      .Double(std::numeric_limits<double>::quiet_NaN())
      .Double(std::numeric_limits<double>::infinity())
      .EndArray();
  EXPECT_EQ(json.Finish(), "[0.1,2.5e+12,-0,null,null]\n");
}

TEST(JsonWriterTest, EveryAsciiCharacterSurvivesAStrictParser) {
  // DEL (127) is left out: Python escapes it, JSON does not require it.
  std::string all_ascii;
  for (int c = 0; c < 127; ++c) all_ascii.push_back(static_cast<char>(c));
  JsonWriter json;
  json.BeginObject().Key("k").String(all_ascii).EndObject();
  absl::StatusOr<std::map<std::string, std::string>> flat = FlattenJson(json.Finish());
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status();
  // Python re-encodes the decoded text with the same escapes our writer uses for ASCII, so equal
  // text means every character decoded back to itself.
  EXPECT_EQ(flat->at("k"), JsonWriter::Quote(all_ascii));
}

TEST(JsonWriterTest, Utf8DecodesToTheSameCodePoints) {
  JsonWriter json;
  json.BeginObject().Key("k").String("caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80 \xff").EndObject();
  absl::StatusOr<std::map<std::string, std::string>> flat = FlattenJson(json.Finish());
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->at("k"), "\"caf\\u00e9 \\u2713 \\ud83d\\ude80 \\ufffd\"");
}

}  // namespace
}  // namespace flopscope::client
