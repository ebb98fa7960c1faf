#include "client/model/rank_stragglers.h"

#include <cmath>

#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using flopscope::v1::Report;

constexpr int kSteps = 10;

void AddModule(Report& report, const std::string& path, uint32_t depth, double seconds_per_step) {
  auto* module = report.add_modules();
  module->set_path(path);
  module->set_name(path.substr(path.find_last_of('/') + 1));
  module->set_depth(depth);
  module->set_calls(kSteps);
  module->set_gpu_time_ns(std::llround(seconds_per_step * kSteps * 1e9));
}

void AddPhase(Report& report, const std::string& name, double seconds_per_step) {
  auto* phase = report.add_phases();
  phase->set_name(name);
  phase->set_calls(kSteps);
  phase->set_cpu_time_ns(std::llround(seconds_per_step * kSteps * 1e9));
}

// One rank's report: a step of `step_s`, layer.1 slower by `layer1_extra_s` and the head by
// `head_extra_s` (the encoder and the model include them).
Report RankReport(int rank, double step_s, double layer1_extra_s = 0, double head_extra_s = 0) {
  Report report;
  report.set_job_id("job");
  report.add_ranks()->set_rank(rank);
  AddPhase(report, "step", step_s);
  AddModule(report, "model", 0, 0.8 + layer1_extra_s + head_extra_s);
  AddModule(report, "model/encoder", 1, 0.6 + layer1_extra_s);
  AddModule(report, "model/encoder/layer.0", 2, 0.3);
  AddModule(report, "model/encoder/layer.1", 2, 0.3 + layer1_extra_s);
  AddModule(report, "model/head", 1, 0.2 + head_extra_s);
  return report;
}

std::vector<Profile> Profiles(const std::vector<Report>& reports) {
  std::vector<Profile> profiles;
  for (const Report& report : reports) profiles.push_back(BuildProfile(report, {}));
  return profiles;
}

TEST(MedianTest, OddEvenAndEmpty) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({}), 0);
}

TEST(StepTimeOfTest, StepPhaseElseForward) {
  EXPECT_DOUBLE_EQ(*StepTimeOf(BuildProfile(RankReport(0, 1.25), {})), 1.25);
  Report no_step;
  no_step.add_ranks()->set_rank(0);
  AddModule(no_step, "model", 0, 0.5);
  // No `step` phase: one step assumed, the forward latency is the top-level modules' time.
  EXPECT_DOUBLE_EQ(*StepTimeOf(BuildProfile(no_step, {})), 0.5 * kSteps);
  EXPECT_FALSE(StepTimeOf(BuildProfile(Report(), {})).has_value());
}

TEST(FindStragglersTest, FlagsTheSlowRankAndDescendsToTheModule) {
  const auto stragglers =
      FindStragglers(Profiles({RankReport(0, 1.0), RankReport(1, 1.0), RankReport(2, 1.02),
                               RankReport(3, 1.5, 0.4, 0.05)}));
  ASSERT_EQ(stragglers.size(), 4u);
  EXPECT_FALSE(stragglers[0] || stragglers[1] || stragglers[2]);  // rank 2: 1.5% < 5%
  ASSERT_TRUE(stragglers[3]);
  EXPECT_NEAR(stragglers[3]->median_step_s, 1.01, 1e-12);
  EXPECT_DOUBLE_EQ(stragglers[3]->step_s, 1.5);
  EXPECT_NEAR(stragglers[3]->excess_pct, 0.49 / 1.01 * 100, 1e-9);
  // model +0.45 s -> encoder +0.4 s (>= half) -> layer.1 +0.4 s; the head (+0.05 s) is not it.
  EXPECT_EQ(stragglers[3]->module, "model/encoder/layer.1");
  EXPECT_NEAR(stragglers[3]->module_excess_s, 0.4, 1e-9);
}

TEST(FindStragglersTest, StopsAtTheParentWhenNoChildCarriesHalf) {
  // The encoder is slower by 0.25 s, spread over its two layers (0.1 s each) and its own code:
  // no layer carries half of it, so the encoder is named.
  Report slow = RankReport(1, 1.3);
  for (auto& module : *slow.mutable_modules()) {
    const int64_t extra_ns = std::llround(0.1 * kSteps * 1e9);
    if (module.path() == "model" || module.path() == "model/encoder") {
      module.set_gpu_time_ns(module.gpu_time_ns() + extra_ns * 5 / 2);
    } else if (module.path().starts_with("model/encoder/layer.")) {
      module.set_gpu_time_ns(module.gpu_time_ns() + extra_ns);
    }
  }
  const auto stragglers = FindStragglers(Profiles({RankReport(0, 1.0), slow, RankReport(2, 1.0)}));
  ASSERT_TRUE(stragglers[1]);
  EXPECT_EQ(stragglers[1]->module, "model/encoder");
  EXPECT_NEAR(stragglers[1]->module_excess_s, 0.25, 1e-9);
}

TEST(FindStragglersTest, SlowWithoutASlowerModuleNamesNone) {
  // The step is longer but no module is: the time went outside the ranges (a collective, say).
  const auto stragglers =
      FindStragglers(Profiles({RankReport(0, 1.0), RankReport(1, 2.0)}), {.threshold_pct = 10});
  EXPECT_FALSE(stragglers[0]);
  ASSERT_TRUE(stragglers[1]);
  EXPECT_DOUBLE_EQ(stragglers[1]->median_step_s, 1.5);
  EXPECT_NEAR(stragglers[1]->excess_pct, 100.0 / 3, 1e-9);
  EXPECT_EQ(stragglers[1]->module, "");
}

TEST(FindStragglersTest, ThresholdAndLoneRank) {
  const auto profiles = Profiles({RankReport(0, 1.0), RankReport(1, 1.0), RankReport(2, 1.2)});
  EXPECT_TRUE(FindStragglers(profiles, {.threshold_pct = 19})[2]);
  EXPECT_FALSE(FindStragglers(profiles, {.threshold_pct = 21})[2]);
  EXPECT_FALSE(FindStragglers(Profiles({RankReport(0, 9.0)}))[0]);
}

}  // namespace
}  // namespace flopscope::client
