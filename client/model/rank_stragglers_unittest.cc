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

// Data parallelism over a step window, as the daemon reports it: medians per step of each
// module's forward and backward ranges, of the `step` range and of the step-to-step period. The
// model is the one above; layer.1 takes `*_extra_s` more per step in one pass (its parents
// include it). Every rank's step of a job in lockstep lasts as long as its slowest rank's.
constexpr double kLockstepForwardS = 0.08;  // the model's forward per step, as layers below
constexpr double kLockstepStepS = 0.3;      // the `step` range of a rank nobody waits for
constexpr double kLockstepBetweenS = 0.02;  // between steps: period less step
constexpr double kLockstepSleepS = 0.15;    // what the slow rank adds

struct LockstepRank {
  int rank = 0;
  double step_s = kLockstepStepS;
  double period_s = kLockstepStepS + kLockstepBetweenS;
  double layer1_forward_extra_s = 0;
  double layer1_backward_extra_s = 0;
  uint32_t micro_batches = 1;
};

void SetStepMedian(double seconds, flopscope::v1::StepLatency* latency) {
  latency->set_samples(kSteps);
  latency->set_median_ns(std::llround(seconds * 1e9));
  latency->set_min_ns(latency->median_ns());
  latency->set_max_ns(latency->median_ns());
}

void AddLockstepModule(Report& report, const std::string& path, uint32_t depth, double forward_s,
                       double backward_s) {
  auto* module = report.add_modules();
  module->set_path(path);
  module->set_name(path.substr(path.find_last_of('/') + 1));
  module->set_depth(depth);
  module->set_calls(2 * kSteps);
  module->set_cpu_time_ns(std::llround((forward_s + backward_s) * kSteps * 1e9));
  SetStepMedian(forward_s + backward_s, module->mutable_step_latency());
  SetStepMedian(forward_s, module->mutable_fwd_step_latency());
  SetStepMedian(backward_s, module->mutable_bwd_step_latency());
}

void AddLockstepPhase(Report& report, const std::string& name, double median_s,
                      uint32_t per_step = 1) {
  auto* phase = report.add_phases();
  phase->set_name(name);
  phase->set_calls(kSteps * per_step);
  phase->set_cpu_time_ns(std::llround(median_s * kSteps * 1e9));
  phase->set_median_ns(std::llround(median_s * 1e9));
  phase->set_occurrences_per_step(per_step);
}

Report LockstepReport(const LockstepRank& spec) {
  Report report;
  report.set_job_id("job");
  report.add_ranks()->set_rank(spec.rank);
  auto* steps = report.mutable_steps();
  steps->set_requested(true);
  steps->set_first_step(1);
  steps->set_last_step(kSteps);
  steps->set_uncounted_steps(kSteps);
  SetStepMedian(spec.period_s, steps->mutable_step_period());
  AddLockstepPhase(report, "step", spec.step_s);
  AddLockstepPhase(report, "forward", kLockstepForwardS + spec.layer1_forward_extra_s,
                   spec.micro_batches);
  AddLockstepPhase(report, "backward",
                   spec.step_s - kLockstepForwardS - spec.layer1_forward_extra_s,
                   spec.micro_batches);
  const double layer_forward_s = kLockstepForwardS / 4;
  const double forward1 = layer_forward_s + spec.layer1_forward_extra_s;
  const double backward1 = 2 * layer_forward_s + spec.layer1_backward_extra_s;
  AddLockstepModule(report, "model", 0, 3 * layer_forward_s + forward1,
                    6 * layer_forward_s + backward1);
  AddLockstepModule(report, "model/encoder", 1, layer_forward_s + forward1,
                    2 * layer_forward_s + backward1);
  AddLockstepModule(report, "model/encoder/layer.0", 2, layer_forward_s, 2 * layer_forward_s);
  AddLockstepModule(report, "model/encoder/layer.1", 2, forward1, backward1);
  AddLockstepModule(report, "model/head", 1, 2 * layer_forward_s, 4 * layer_forward_s);
  return report;
}

std::vector<Profile> LockstepProfiles(const std::vector<LockstepRank>& specs) {
  std::vector<Profile> profiles;
  for (const LockstepRank& spec : specs) profiles.push_back(BuildProfile(LockstepReport(spec), {}));
  return profiles;
}

TEST(FindStragglersTest, TheRankSlowInAForwardIsTheOneTheOthersWaitedFor) {
  // Rank 1 sleeps in layer.1's forward; the all-reduce makes every step as long as its step.
  const double step_s = kLockstepStepS + kLockstepSleepS;
  const double period_s = step_s + kLockstepBetweenS;
  const std::vector<Profile> profiles =
      LockstepProfiles({{.rank = 0, .step_s = step_s, .period_s = period_s},
                        {.rank = 1,
                         .step_s = step_s,
                         .period_s = period_s,
                         .layer1_forward_extra_s = kLockstepSleepS},
                        {.rank = 2, .step_s = step_s, .period_s = period_s}});
  ASSERT_TRUE(profiles[1].passes_marked);
  const auto stragglers = FindStragglers(profiles);
  ASSERT_EQ(stragglers.size(), 3u);
  EXPECT_FALSE(stragglers[0]);
  EXPECT_FALSE(stragglers[2]);
  ASSERT_TRUE(stragglers[1]);
  EXPECT_EQ(stragglers[1]->cause, StragglerCause::kWaitedFor);
  EXPECT_EQ(stragglers[1]->pass, StragglerPass::kForward);
  EXPECT_EQ(stragglers[1]->module, "model/encoder/layer.1");
  EXPECT_NEAR(stragglers[1]->waited_s, kLockstepSleepS, 1e-9);
  EXPECT_NEAR(stragglers[1]->module_excess_s, kLockstepSleepS, 1e-9);
  // Its step is the others' (they waited inside theirs): nothing to see there.
  EXPECT_DOUBLE_EQ(stragglers[1]->step_s, step_s);
  EXPECT_NEAR(stragglers[1]->excess_pct, 0, 1e-9);
}

TEST(FindStragglersTest, TheRankSlowInABackwardIsTheOneTheOthersWaitedFor) {
  const double step_s = kLockstepStepS + kLockstepSleepS;
  const double period_s = step_s + kLockstepBetweenS;
  const std::vector<Profile> profiles =
      LockstepProfiles({{.rank = 0, .step_s = step_s, .period_s = period_s},
                        {.rank = 1, .step_s = step_s, .period_s = period_s},
                        {.rank = 2,
                         .step_s = step_s,
                         .period_s = period_s,
                         .layer1_backward_extra_s = kLockstepSleepS},
                        {.rank = 3, .step_s = step_s, .period_s = period_s}});
  const auto stragglers = FindStragglers(profiles);
  for (int rank : {0, 1, 3}) EXPECT_FALSE(stragglers[rank]) << rank;
  ASSERT_TRUE(stragglers[2]);
  EXPECT_EQ(stragglers[2]->cause, StragglerCause::kWaitedFor);
  EXPECT_EQ(stragglers[2]->pass, StragglerPass::kBackward);
  EXPECT_EQ(stragglers[2]->module, "model/encoder/layer.1");
  EXPECT_NEAR(stragglers[2]->waited_s, kLockstepSleepS, 1e-9);
}

TEST(FindStragglersTest, TheRankSlowBetweenStepsIsNamedAndItsVictimsAreNot) {
  // Rank 0 sleeps between steps: its own step is as usual, the others start their next step
  // without it and wait inside it; every rank's period is the same.
  const double period_s = kLockstepStepS + kLockstepBetweenS + kLockstepSleepS;
  const double victim_step_s = kLockstepStepS + kLockstepSleepS;
  for (int ranks : {2, 3}) {
    std::vector<LockstepRank> specs = {{.rank = 0, .period_s = period_s}};
    for (int rank = 1; rank < ranks; ++rank) {
      specs.push_back({.rank = rank, .step_s = victim_step_s, .period_s = period_s});
    }
    const auto stragglers = FindStragglers(LockstepProfiles(specs));
    ASSERT_TRUE(stragglers[0]) << ranks;
    EXPECT_EQ(stragglers[0]->cause, StragglerCause::kWaitedFor);
    EXPECT_EQ(stragglers[0]->pass, StragglerPass::kBetweenSteps);
    EXPECT_EQ(stragglers[0]->module, "");
    EXPECT_NEAR(stragglers[0]->waited_s, kLockstepSleepS, 1e-9);
    // The victims' steps are longer, by more than the threshold where they are not the median
    // (two ranks): still they are not flagged.
    for (int rank = 1; rank < ranks; ++rank) EXPECT_FALSE(stragglers[rank]) << ranks;
  }
}

TEST(FindStragglersTest, AVictimsLongerStepIsNotFlaggedWhereTheStepTimesAloneWould) {
  // Two ranks: the one that waited has the longer step, 20 % above the median of the two.
  const double period_s = kLockstepStepS + kLockstepBetweenS + kLockstepSleepS;
  const std::vector<Profile> profiles = LockstepProfiles(
      {{.rank = 0, .period_s = period_s},
       {.rank = 1, .step_s = kLockstepStepS + kLockstepSleepS, .period_s = period_s}});
  const double median_step = kLockstepStepS + kLockstepSleepS / 2;
  ASSERT_GT((kLockstepStepS + kLockstepSleepS - median_step) / median_step * 100,
            StragglerOptions{}.threshold_pct);
  const auto stragglers = FindStragglers(profiles);
  EXPECT_FALSE(stragglers[1]);
  ASSERT_TRUE(stragglers[0]);
  EXPECT_EQ(stragglers[0]->pass, StragglerPass::kBetweenSteps);
  // The step figures stay what they are: its step is below the median.
  EXPECT_DOUBLE_EQ(stragglers[0]->median_step_s, median_step);
  EXPECT_LT(stragglers[0]->excess_pct, 0);
}

TEST(FindStragglersTest, WithNoCollectiveTheSlowRankIsASlowerStep) {
  // Nobody waits: rank 1's step and period are longer by what its forward adds.
  const std::vector<Profile> profiles =
      LockstepProfiles({{.rank = 0},
                        {.rank = 1,
                         .step_s = kLockstepStepS + kLockstepSleepS,
                         .period_s = kLockstepStepS + kLockstepBetweenS + kLockstepSleepS,
                         .layer1_forward_extra_s = kLockstepSleepS},
                        {.rank = 2}});
  const auto stragglers = FindStragglers(profiles);
  EXPECT_FALSE(stragglers[0] || stragglers[2]);
  ASSERT_TRUE(stragglers[1]);
  EXPECT_EQ(stragglers[1]->cause, StragglerCause::kSlowerStep);
  EXPECT_EQ(stragglers[1]->pass, StragglerPass::kForward);
  EXPECT_EQ(stragglers[1]->module, "model/encoder/layer.1");
  EXPECT_NEAR(stragglers[1]->module_excess_s, kLockstepSleepS, 1e-9);
  EXPECT_NEAR(stragglers[1]->excess_pct, kLockstepSleepS / kLockstepStepS * 100, 1e-9);
  EXPECT_EQ(stragglers[1]->waited_s, 0);
}

TEST(FindStragglersTest, AWaitBelowTheThresholdIsNotFlagged) {
  const double extra_s = 0.01;
  const double period_s = kLockstepStepS + extra_s + kLockstepBetweenS;
  const std::vector<Profile> profiles =
      LockstepProfiles({{.rank = 0, .step_s = kLockstepStepS + extra_s, .period_s = period_s},
                        {.rank = 1,
                         .step_s = kLockstepStepS + extra_s,
                         .period_s = period_s,
                         .layer1_forward_extra_s = extra_s},
                        {.rank = 2, .step_s = kLockstepStepS + extra_s, .period_s = period_s}});
  const double share_pct = extra_s / period_s * 100;
  EXPECT_FALSE(FindStragglers(profiles, {.threshold_pct = share_pct + 0.5})[1]);
  const auto flagged = FindStragglers(profiles, {.threshold_pct = share_pct - 0.5})[1];
  ASSERT_TRUE(flagged);
  EXPECT_NEAR(flagged->waited_s, extra_s, 1e-9);
}

TEST(FindStragglersTest, GradientAccumulationWaitsArePerStep) {
  // Two micro-batches a step: the profile's model rows are one micro-batch's, the wait a step's.
  const uint32_t micro_batches = 2;
  const double step_s = kLockstepStepS + kLockstepSleepS;
  const double period_s = step_s + kLockstepBetweenS;
  const std::vector<Profile> profiles = LockstepProfiles(
      {{.rank = 0, .step_s = step_s, .period_s = period_s, .micro_batches = micro_batches},
       {.rank = 1,
        .step_s = step_s,
        .period_s = period_s,
        .layer1_forward_extra_s = kLockstepSleepS,
        .micro_batches = micro_batches},
       {.rank = 2, .step_s = step_s, .period_s = period_s, .micro_batches = micro_batches}});
  ASSERT_EQ(profiles[1].micro_batches, micro_batches);
  const auto stragglers = FindStragglers(profiles);
  ASSERT_TRUE(stragglers[1]);
  EXPECT_EQ(stragglers[1]->module, "model/encoder/layer.1");
  EXPECT_NEAR(stragglers[1]->waited_s, kLockstepSleepS, 1e-9);
}

}  // namespace
}  // namespace flopscope::client
