#include "client/text/deepspeed_format.h"

#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

// Every vector of REFERENCE_VALUES.md section 3 (computed by running DeepSpeed's own helpers).
TEST(DeepSpeedFormatTest, NumberToStringMatchesEveryReferenceVector) {
  EXPECT_EQ(NumberToString(0), "0 ");
  EXPECT_EQ(NumberToString(0.5), "500 m");
  EXPECT_EQ(NumberToString(1), "1 ");
  EXPECT_EQ(NumberToString(999), "999 ");
  EXPECT_EQ(NumberToString(999.994), "999.99 ");
  EXPECT_EQ(NumberToString(999.995), "1000 ");
  EXPECT_EQ(NumberToString(999999), "1000 K");
  EXPECT_EQ(NumberToString(1000), "1 K");
  EXPECT_EQ(NumberToString(1234), "1.23 K");
  EXPECT_EQ(NumberToString(866076672), "866.08 M");
  EXPECT_EQ(NumberToString(6.27986e12), "6.28 T");
  EXPECT_EQ(NumberToString(3.13993e15), "3139.93 T");
  EXPECT_EQ(NumberToString(1.23456789e17), "123457 T");
  EXPECT_EQ(NumberToString(1e18), "1e+06 T");
  EXPECT_EQ(NumberToString(1e-3), "1 m");
  EXPECT_EQ(NumberToString(9.99e-4), "999 u");
  EXPECT_EQ(NumberToString(1e-7), "0.1 u");
  EXPECT_EQ(NumberToString(1e-9), "0 u");
  EXPECT_EQ(NumberToString(-5), "-5e+06 u");
  EXPECT_EQ(NumberToString(200), "200 ");
  EXPECT_EQ(NumberToString(12.5), "12.5 ");
  EXPECT_EQ(NumberToString(0.125), "125 m");
  EXPECT_EQ(NumberToString(866076672, "G"), "0.87 G");
  EXPECT_EQ(NumberToString(5, "X"), "5 X");
}

TEST(DeepSpeedFormatTest, MacsAndFlopsMatchTheReferenceVectors) {
  EXPECT_EQ(MacsToString(426516480), "426.52 MMACs");
  EXPECT_EQ(MacsToString(3.13993e12), "3.14 TMACs");
  EXPECT_EQ(MacsToString(0), "0 MACs");
  EXPECT_EQ(MacsToString(100), "100 MACs");
  EXPECT_EQ(FlopsToString(81.9e12), "81.9 TFLOPS");
  EXPECT_EQ(FlopsToString(7.04127e10), "70.41 GFLOPS");
  EXPECT_EQ(FlopsToString(0), "0 FLOPS");
  EXPECT_EQ(FlopsToString(1.7777e9), "1.78 GFLOPS");
}

TEST(DeepSpeedFormatTest, ParamsMatchTheReferenceVectors) {
  EXPECT_EQ(ParamsToString(61706), "61.71 K");
  EXPECT_EQ(ParamsToString(110), "110");
  EXPECT_EQ(ParamsToString(336.23e6), "336.23 M");
  EXPECT_EQ(ParamsToString(1.5e9), "1.5 B");
  EXPECT_EQ(ParamsToString(175e9), "175 B");
  EXPECT_EQ(ParamsToString(0), "0");
  EXPECT_EQ(ParamsToString(999), "999");
  EXPECT_EQ(ParamsToString(1.5e9, "B"), "1.5 B");
}

TEST(DeepSpeedFormatTest, DurationsMatchTheReferenceVectors) {
  EXPECT_EQ(DurationToString(0.07667), "76.67 ms");
  EXPECT_EQ(DurationToString(0.18473), "184.73 ms");
  EXPECT_EQ(DurationToString(3.409e-5), "34.09 us");
  EXPECT_EQ(DurationToString(1.89), "1.89 s");
  EXPECT_EQ(DurationToString(0), "0 s");
  EXPECT_EQ(DurationToString(1e-9), "0 us");
  EXPECT_EQ(DurationToString(41.39), "41.39 s");
  EXPECT_EQ(DurationToString(125.0), "125 s");
  EXPECT_EQ(DurationToString(0.5, "u"), "500000 us");
}

TEST(DeepSpeedFormatTest, RoundedGPrintsPercentagesAsPythonDoes) {
  EXPECT_EQ(RoundedG(100.0 * 156 / 61706), "0.25");
  EXPECT_EQ(RoundedG(100), "100");
  EXPECT_EQ(RoundedG(102.0), "102");
}

}  // namespace
}  // namespace flopscope::client
