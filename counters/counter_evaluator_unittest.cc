#include "counters/counter_evaluator.h"

#include <gtest/gtest.h>

#include "counters/metric_planner.h"
#include "counters/testing/host_api_for_test.h"

namespace flopscope::counters {
namespace {

using testing::HostApiForTest;

MetricPlan Gh100Plan() {
  MetricPlanner planner(HostApiForTest());
  MetricPlan plan;
  std::string error;
  EXPECT_TRUE(planner.Plan("GH100", MetricSetKind::kFull, nullptr, 0, &plan, &error)) << error;
  return plan;
}

TEST(CounterEvaluatorTest, InitializesForAPlan) {
  const MetricPlan plan = Gh100Plan();
  CounterEvaluator evaluator;
  EXPECT_FALSE(evaluator.initialized());
  std::string error;
  ASSERT_TRUE(evaluator.Init(HostApiForTest(), plan.chip, plan.metrics, nullptr, 0, &error))
      << error;
  EXPECT_TRUE(evaluator.initialized());
  EXPECT_EQ(evaluator.metrics(), plan.metrics);
  // Re-targeting replaces the host object and the metric list.
  ASSERT_TRUE(
      evaluator.Init(HostApiForTest(), "GA100", {"gpu__time_duration.sum"}, nullptr, 0, &error))
      << error;
  EXPECT_EQ(evaluator.metrics(), std::vector<std::string>{"gpu__time_duration.sum"});
}

TEST(CounterEvaluatorTest, RefusesMetricsThePlannerWouldHaveRejected) {
  CounterEvaluator evaluator;
  std::string error;
  EXPECT_FALSE(evaluator.Init(HostApiForTest(), "GB202",
                              {"gpu__time_duration.sum", "sm__ops_path_tensor_src_fp16.sum"},
                              nullptr, 0, &error));
  EXPECT_NE(error.find("GB202"), std::string::npos) << error;
  // The metrics are tried one by one, so the error names the one the chip has not.
  EXPECT_NE(error.find("rejected alone: sm__ops_path_tensor_src_fp16.sum (CUPTI_ERROR_"),
            std::string::npos)
      << error;
  EXPECT_EQ(error.find("gpu__time_duration.sum ("), std::string::npos) << error;
  EXPECT_FALSE(evaluator.initialized());
  EXPECT_TRUE(evaluator.metrics().empty());
  EXPECT_FALSE(evaluator.Init(HostApiForTest(), "GB202", {}, nullptr, 0, &error));
  EXPECT_FALSE(
      evaluator.Init(HostApiForTest(), "XY999", {"gpu__time_duration.sum"}, nullptr, 0, &error));
  EXPECT_NE(error.find("XY999"), std::string::npos) << error;
}

// What the H200 did in the GPU acceptance of 2026-11-25: CUPTI refused the metric list of a host
// object given the device's availability image (CUPTI_ERROR_UNKNOWN), where the same list is
// fine for the chip name alone. The stand-in keeps the image away from CUPTI (arbitrary bytes
// crash it) and only remembers that one was given; everything else is the real Host API.
bool given_availability = false;

CUptiResult InitializeRememberingAvailability(CUpti_Profiler_Host_Initialize_Params* params) {
  given_availability = params->pCounterAvailabilityImage != nullptr;
  CUpti_Profiler_Host_Initialize_Params without = *params;
  without.pCounterAvailabilityImage = nullptr;
  const CUptiResult result = HostApiForTest().initialize(&without);
  params->pHostObject = without.pHostObject;
  return result;
}

CUptiResult AddMetricsRefusedWithAvailability(CUpti_Profiler_Host_ConfigAddMetrics_Params* params) {
  return given_availability ? CUPTI_ERROR_UNKNOWN : HostApiForTest().config_add_metrics(params);
}

TEST(CounterEvaluatorTest, AListRefusedOnlyWithTheAvailabilityImageIsEvaluatedWithoutIt) {
  ProfilerHostApi api = HostApiForTest();
  api.initialize = InitializeRememberingAvailability;
  api.config_add_metrics = AddMetricsRefusedWithAvailability;
  const MetricPlan plan = Gh100Plan();
  const std::vector<uint8_t> availability(64, 1);  // never reaches CUPTI (see above)
  CounterEvaluator evaluator;
  std::string error;
  ASSERT_TRUE(evaluator.Init(api, plan.chip, plan.metrics, availability.data(), availability.size(),
                             &error))
      << error;
  EXPECT_TRUE(evaluator.initialized());
  EXPECT_EQ(evaluator.metrics(), plan.metrics);
  EXPECT_NE(evaluator.note().find("availability image"), std::string::npos) << evaluator.note();
  EXPECT_NE(evaluator.note().find("CUPTI_ERROR_UNKNOWN"), std::string::npos) << evaluator.note();

  // Without an image there is nothing to leave out, and nothing to note.
  ASSERT_TRUE(evaluator.Init(HostApiForTest(), plan.chip, plan.metrics, nullptr, 0, &error));
  EXPECT_TRUE(evaluator.note().empty()) << evaluator.note();
}

TEST(CounterEvaluatorTest, EvaluatingBeforeInitFails) {
  CounterEvaluator evaluator;
  const std::vector<uint8_t> image(4096, 0);
  std::vector<double> values = {1.0};
  std::string error;
  EXPECT_FALSE(evaluator.Evaluate(image.data(), image.size(), 0, &values, &error));
  EXPECT_TRUE(values.empty());
  EXPECT_NE(error.find("not initialized"), std::string::npos) << error;
}

TEST(CounterEvaluatorTest, AnImageThatIsNotCounterDataFailsCleanly) {
  const MetricPlan plan = Gh100Plan();
  CounterEvaluator evaluator;
  std::string error;
  ASSERT_TRUE(evaluator.Init(HostApiForTest(), plan.chip, plan.metrics, nullptr, 0, &error))
      << error;
  std::vector<double> values = {1.0, 2.0};
  // Refused by CUPTI itself: no counter data header.
  const std::vector<uint8_t> blank(4096, 0);
  EXPECT_FALSE(evaluator.Evaluate(blank.data(), blank.size(), 0, &values, &error));
  EXPECT_TRUE(values.empty());
  EXPECT_NE(error.find("CUPTI_ERROR"), std::string::npos) << error;
  // Refused before CUPTI, which would read past the end of these.
  const std::vector<uint8_t> truncated(16, 0);
  EXPECT_FALSE(evaluator.Evaluate(truncated.data(), truncated.size(), 0, &values, &error));
  EXPECT_NE(error.find("16 bytes"), std::string::npos) << error;
  EXPECT_FALSE(evaluator.Evaluate(nullptr, 4096, 0, &values, &error));
  EXPECT_TRUE(values.empty());
  // Still usable afterwards.
  EXPECT_TRUE(evaluator.initialized());
  EXPECT_FALSE(evaluator.Evaluate(blank.data(), blank.size(), 3, &values, &error));
}

}  // namespace
}  // namespace flopscope::counters
