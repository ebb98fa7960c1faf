#include "importer/python_repr.h"

#include <gtest/gtest.h>

namespace flopscope::importer {
namespace {

TEST(PythonReprToJsonTest, ConvertsReprOfDevices) {
  absl::StatusOr<std::string> json = PythonReprToJson(
      "[{'id': 0, 'name': 'NVIDIA A100', 'ok': True, 'x': None, 'dims': (1, 2), 'one': (3,)}]");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json,
            "[{\"id\": 0, \"name\": \"NVIDIA A100\", \"ok\": true, \"x\": null, \"dims\": [1, 2], "
            "\"one\": [3]}]");
}

TEST(PythonReprToJsonTest, QuotesAndEscapes) {
  absl::StatusOr<std::string> json = PythonReprToJson(R"({"it's": 'say "hi"', 'e': '\x41\n'})");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json, R"({"it's": "say \"hi\"", "e": "\u0041\n"})");
}

TEST(PythonReprToJsonTest, NumbersAndNonFiniteFloats) {
  absl::StatusOr<std::string> json = PythonReprToJson("[1e-05, -2.5E+3, inf, -inf, nan]");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json, "[1e-05, -2.5E+3, null, null, null]");
}

// Found by python_repr_fuzzer: a '+' before a non-digit swallowed the next character, so "+("
// kept a raw '(' (a tuple never became an array) and "+'" dropped a quote.
TEST(PythonReprToJsonTest, PlusOnlySignsADigit) {
  EXPECT_EQ(PythonReprToJson("(+1, +(2,))").value(), "[1, +[2]]");
  EXPECT_EQ(PythonReprToJson("+").value(), "+");
  EXPECT_FALSE(PythonReprToJson("+'").ok());  // an unterminated string, as without the '+'
}

TEST(PythonReprToJsonTest, JsonPassesThroughUnchanged) {
  const std::string json = R"({"rank": 3, "world_size": 8, "pg": [{"a": "b"}]})";
  EXPECT_EQ(PythonReprToJson(json).value(), json);
}

TEST(PythonReprToJsonTest, RejectsWhatReprNeverWrites) {
  EXPECT_FALSE(PythonReprToJson("{'a': 'open").ok());
  EXPECT_FALSE(PythonReprToJson("{'a': <object at 0x1>}").ok());
  EXPECT_FALSE(PythonReprToJson("{'a': Tensor}").ok());
}

}  // namespace
}  // namespace flopscope::importer
