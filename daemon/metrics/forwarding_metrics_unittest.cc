// The forwarding families: each figure on its sample line, the lag from the oldest put time,
// and a fixed set of unlabelled series whatever the outbox holds.
#include "daemon/metrics/forwarding_metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "daemon/testing/test_exposition.h"

namespace flopscope::daemon::metrics {
namespace {

using fixtures::ExpositionSamples;
using fixtures::kSecondNs;

TEST(ForwardingMetricsTest, EachFigureIsASampleAndTheLagIsTheOldestBatchsAge) {
  ForwardingFigures figures;
  figures.outbox_batches = 12;
  figures.outbox_bytes = 34567;
  figures.dropped_batches = 3;
  figures.streams_connected = 2;
  const int64_t now = 1'700'000'000 * kSecondNs;
  figures.oldest_put_ns = now - 2 * kSecondNs - kSecondNs / 2;
  const std::map<std::string, double> samples =
      ExpositionSamples(ForwardingMetricsText(figures, now));
  EXPECT_EQ(samples, (std::map<std::string, double>{
                         {"flopscope_forward_outbox_batches", 12},
                         {"flopscope_forward_outbox_bytes", 34567},
                         {"flopscope_forward_dropped_batches_total", 3},
                         {"flopscope_forward_lag_seconds", 2.5},
                         {"flopscope_forward_streams_connected", 2},
                     }));
}

TEST(ForwardingMetricsTest, NothingWaitingIsNoLagAndAClockStepBackIsNoNegativeLag) {
  ForwardingFigures figures;
  const int64_t now = 1'700'000'000 * kSecondNs;
  EXPECT_EQ(ExpositionSamples(ForwardingMetricsText(figures, now))["flopscope_forward_lag_seconds"],
            0.0);
  figures.outbox_batches = 1;
  figures.oldest_put_ns = now + 5 * kSecondNs;  // put "in the future": the clock went back
  EXPECT_EQ(ExpositionSamples(ForwardingMetricsText(figures, now))["flopscope_forward_lag_seconds"],
            0.0);
}

TEST(ForwardingMetricsTest, EveryFamilyHasHelpTypeAndOneUnlabelledSample) {
  ForwardingFigures figures;
  figures.outbox_batches = 1'000'000;  // whatever waits, the series stay the same five
  figures.oldest_put_ns = 1;
  const std::string text = ForwardingMetricsText(figures, 2);
  size_t help = 0, type = 0, samples = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "# HELP ")) {
      ++help;
    } else if (absl::StartsWith(line, "# TYPE ")) {
      ++type;
    } else {
      ++samples;
      EXPECT_EQ(line.find('{'), absl::string_view::npos) << line;
    }
  }
  EXPECT_EQ(help, 5u);
  EXPECT_EQ(type, 5u);
  EXPECT_EQ(samples, 5u);
  EXPECT_NE(text.find("# TYPE flopscope_forward_dropped_batches_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE flopscope_forward_lag_seconds gauge"), std::string::npos);
}

}  // namespace
}  // namespace flopscope::daemon::metrics
