// The exposition of /metrics: label values bounded and escaped, sample values
// as Prometheus parses them, and a whole text against its golden, written here
// from the same inputs the families get.
#include "daemon/metrics/exposition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace flopscope::daemon::metrics {
namespace {

// The text of one gauge family with one sample.
std::string GaugeText(const Labels& labels, double value) {
  prometheus::MetricFamily family = Family("x", prometheus::MetricType::Gauge, "X.");
  AddSample(&family, labels, value);
  return Serialize({family});
}

// The value of the only sample of GaugeText({}, value), as written.
std::string ValueText(double value) {
  const std::string text = GaugeText({}, value);
  const size_t line = text.find("\nx ");
  return text.substr(line + 3, text.size() - (line + 3) - 1);
}

TEST(LabelValueTest, BackslashQuoteAndNewlineAreEscapedInTheText) {
  EXPECT_NE(GaugeText({{"hostname", "a\\b\"c\nd"}}, 1).find(R"(x{hostname="a\\b\"c\nd"} 1)"),
            std::string::npos);
  EXPECT_NE(GaugeText({{"hostname", "plain-host_01"}}, 1).find(R"(x{hostname="plain-host_01"})"),
            std::string::npos);
}

TEST(LabelValueTest, IllFormedUtf8BecomesTheReplacementCharacter) {
  EXPECT_EQ(LabelValue("a\xff"
                       "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_NE(GaugeText({{"job", "a\xff"}}, 1).find("x{job=\"a\xEF\xBF\xBD\"}"), std::string::npos);
}

TEST(LabelValueTest, LongValuesAreCutAtACharacterBoundary) {
  const std::string two_byte = "\xC3\xA9";  // é
  std::string text;
  for (size_t i = 0; i < kMaxLabelValueBytes; ++i) text += two_byte;
  const std::string value = LabelValue(text);
  EXPECT_LE(value.size(), kMaxLabelValueBytes);
  EXPECT_EQ(value.size() % two_byte.size(), 0u);
  EXPECT_EQ(value.substr(0, 2), two_byte);
  EXPECT_NE(GaugeText({{"job", text}}, 1).find("x{job=\"" + value + "\"}"), std::string::npos);
}

TEST(SampleValueTest, RoundTripAndSpecialValues) {
  EXPECT_EQ(ValueText(0), "0");
  EXPECT_EQ(ValueText(42), "42");
  EXPECT_EQ(ValueText(0.1), "0.1");
  EXPECT_EQ(std::stod(ValueText(1.0 / 3)), 1.0 / 3);
  EXPECT_EQ(std::stod(ValueText(1e300)), 1e300);
  EXPECT_EQ(ValueText(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(ValueText(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_TRUE(std::isnan(std::stod(ValueText(std::nan("")))));  // Prometheus reads "Nan" too
}

TEST(SerializeTest, FamiliesAndSamplesInTheTextFormat) {
  const std::string host = "node\"7\"";
  const double seconds = 0.25;
  prometheus::MetricFamily step =
      Family("x_step_seconds", prometheus::MetricType::Gauge, "Step time.");
  AddSample(&step, {{"hostname", host}, {"rank", "3"}}, seconds);
  prometheus::MetricFamily total = Family("x_total", prometheus::MetricType::Counter, "A counter.");
  AddSample(&total, {}, 7);
  // The golden spells the escapes out (\" in the label value) and keeps the
  // labels' order.
  const std::string expected = R"(# HELP x_step_seconds Step time.
# TYPE x_step_seconds gauge
x_step_seconds{hostname="node\"7\"",rank="3"} 0.25
# HELP x_total A counter.
# TYPE x_total counter
x_total 7
)";
  EXPECT_EQ(Serialize({step, total}), expected);
}

}  // namespace
}  // namespace flopscope::daemon::metrics
