// The text exposition format: escaping, values, and a whole text against its golden, which is
// written here from the same inputs the writer gets.
#include "daemon/metrics/exposition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace flopscope::daemon::metrics {
namespace {

TEST(EscapeLabelValueTest, EscapesBackslashQuoteAndNewline) {
  EXPECT_EQ(EscapeLabelValue(R"(a\b"c)"
                             "\n"
                             "d"),
            R"(a\\b\"c\nd)");
  EXPECT_EQ(EscapeLabelValue("plain-host_01"), "plain-host_01");
}

TEST(EscapeLabelValueTest, IllFormedUtf8BecomesTheReplacementCharacter) {
  EXPECT_EQ(EscapeLabelValue("a\xff"
                             "b"),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(EscapeLabelValueTest, LongValuesAreCutAtACharacterBoundary) {
  const std::string two_byte = "\xC3\xA9";  // é
  std::string text;
  for (size_t i = 0; i < kMaxLabelValueBytes; ++i) text += two_byte;
  const std::string escaped = EscapeLabelValue(text);
  EXPECT_LE(escaped.size(), kMaxLabelValueBytes);
  EXPECT_EQ(escaped.size() % two_byte.size(), 0u);
  EXPECT_EQ(escaped.substr(0, 2), two_byte);
}

TEST(EscapeHelpTest, EscapesBackslashAndNewlineButNotQuotes) {
  EXPECT_EQ(EscapeHelp("a\\b\n\"c\""), "a\\\\b\\n\"c\"");
}

TEST(FormatSampleValueTest, ShortestRoundTripAndSpecialValues) {
  EXPECT_EQ(FormatSampleValue(0), "0");
  EXPECT_EQ(FormatSampleValue(42), "42");
  EXPECT_EQ(FormatSampleValue(0.1), "0.1");
  EXPECT_EQ(std::stod(FormatSampleValue(1.0 / 3)), 1.0 / 3);
  EXPECT_EQ(std::stod(FormatSampleValue(1e300)), 1e300);
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatSampleValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatSampleValue(std::nan("")), "NaN");
}

TEST(IsValidMetricNameTest, FollowsThePrometheusGrammar) {
  EXPECT_TRUE(IsValidMetricName("flopscope_rank_step_seconds"));
  EXPECT_TRUE(IsValidMetricName("a:b"));
  EXPECT_FALSE(IsValidMetricName("a:b", /*colon_allowed=*/false));
  EXPECT_TRUE(IsValidMetricName("UUID", /*colon_allowed=*/false));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_FALSE(IsValidMetricName("0abc"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
}

TEST(ExpositionWriterTest, FamiliesAndSamplesInTheTextFormat) {
  const std::string host = "node\"7\"";
  const double seconds = 0.25;
  ExpositionWriter writer;
  writer.Family("x_step_seconds", MetricType::kGauge, "Step time.\nSecond line");
  writer.Sample("x_step_seconds", {{"hostname", host}, {"rank", "3"}}, seconds);
  writer.Family("x_total", MetricType::kCounter, "A counter.");
  writer.Sample("x_total", {}, 7);
  EXPECT_EQ(writer.samples(), 2u);
  // The golden spells the escapes out: \" in the label value, \n in the HELP text.
  const std::string expected = R"(# HELP x_step_seconds Step time.\nSecond line
# TYPE x_step_seconds gauge
x_step_seconds{hostname="node\"7\"",rank="3"} 0.25
# HELP x_total A counter.
# TYPE x_total counter
x_total 7
)";
  EXPECT_EQ(writer.Take(), expected);
}

}  // namespace
}  // namespace flopscope::daemon::metrics
