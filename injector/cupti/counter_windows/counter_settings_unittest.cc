#include "injector/cupti/counter_windows/counter_settings.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace flopscope::injector::cupti {
namespace {

using counters::MetricSetKind;

CounterSettings FromEnv(std::map<std::string, std::string> vars) {
  // The lookup's strings must outlive the call: keep the map alive in a static per call site.
  static std::map<std::string, std::string> env;
  env = std::move(vars);
  return CounterSettingsFromEnvironment([](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(CounterSettingsTest, UnsetMeansNoEnvironmentWindowsAndDefaults) {
  const CounterSettings settings = FromEnv({});
  EXPECT_FALSE(settings.windows.any);
  EXPECT_EQ(settings.metric_set, MetricSetKind::kFull);
  EXPECT_EQ(settings.max_ranges, CounterSettings::kDefaultMaxRanges);
  EXPECT_LE(settings.max_ranges, 1024u);  // gpu-review D6: well below SetConfig's reported limit
  EXPECT_EQ(settings.world_size, 1u);
  EXPECT_FALSE(settings.multi_rank());
  EXPECT_TRUE(settings.warnings.empty());
}

TEST(CounterSettingsTest, OneStep) {
  const CounterSettings settings = FromEnv({{"FLOPSCOPE_COUNTERS", "steps=3"}});
  EXPECT_TRUE(settings.windows.any);
  EXPECT_EQ(settings.windows.first, 3);
  EXPECT_EQ(settings.windows.last, 3);
  EXPECT_EQ(settings.windows.every, 0);
  EXPECT_EQ(settings.text, "steps=3");
  EXPECT_TRUE(settings.warnings.empty());
}

TEST(CounterSettingsTest, AStepRangeWithTheFullSet) {
  const CounterSettings settings = FromEnv({{"FLOPSCOPE_COUNTERS", "set=full,steps=3:4"}});
  EXPECT_EQ(settings.windows.first, 3);
  EXPECT_EQ(settings.windows.last, 4);
  EXPECT_EQ(settings.metric_set, MetricSetKind::kFull);
}

// The step-range syntax of `flopscope report --steps` (issue 14: one vocabulary).
TEST(CounterSettingsTest, ARangeFromStepZeroIsWrittenWithoutItsStart) {
  const CounterSettings settings = FromEnv({{"FLOPSCOPE_COUNTERS", "steps=:2"}});
  EXPECT_TRUE(settings.windows.any);
  EXPECT_EQ(settings.windows.first, 0);
  EXPECT_EQ(settings.windows.last, 2);
  EXPECT_TRUE(settings.warnings.empty());
}

TEST(CounterSettingsTest, TheOldDashFormIsRefusedWithItsNewSpelling) {
  const CounterSettings settings = FromEnv({{"FLOPSCOPE_COUNTERS", "steps=3-4"}});
  EXPECT_FALSE(settings.windows.any);
  ASSERT_EQ(settings.warnings.size(), 1u);
  EXPECT_NE(settings.warnings[0].find("steps=3:4"), std::string::npos) << settings.warnings[0];
}

TEST(CounterSettingsTest, AWindowWithoutAnEndIsRefusedWithTheReason) {
  const CounterSettings settings = FromEnv({{"FLOPSCOPE_COUNTERS", "steps=3:"}});
  EXPECT_FALSE(settings.windows.any);
  ASSERT_EQ(settings.warnings.size(), 1u);
  EXPECT_NE(settings.warnings[0].find("must end"), std::string::npos) << settings.warnings[0];
}

TEST(CounterSettingsTest, EveryAndEveryWithACount) {
  CounterSettings settings = FromEnv({{"FLOPSCOPE_COUNTERS", "every=500"}});
  EXPECT_EQ(settings.windows.every, 500);
  EXPECT_EQ(settings.windows.count, 1);
  settings = FromEnv({{"FLOPSCOPE_COUNTERS", "every=500,steps=2,set=cheap"}});
  EXPECT_EQ(settings.windows.every, 500);
  EXPECT_EQ(settings.windows.count, 2);
  EXPECT_EQ(settings.metric_set, MetricSetKind::kCheap);
  EXPECT_TRUE(settings.warnings.empty());
}

TEST(CounterSettingsTest, SetAloneChoosesTheDaemonWindowsSetOnly) {
  const CounterSettings settings = FromEnv({{"FLOPSCOPE_COUNTERS", "set=full"}});
  EXPECT_FALSE(settings.windows.any);
  EXPECT_EQ(settings.metric_set, MetricSetKind::kFull);
  EXPECT_TRUE(settings.warnings.empty());
}

TEST(CounterSettingsTest, MalformedTextGivesOneWarningAndNoWindows) {
  for (const char* text :
       {"steps=", "steps=x", "steps=4:3", "steps=-1", "step=3", "every=0", "every=10,steps=11",
        "every=10,steps=2:3", "steps=3,steps=4", "set=fast,steps=3", "steps=3;every=2", ",",
        "steps=3 ", "every=99999999999999999999", "steps=0:10000", "every=20000,steps=10001"}) {
    const CounterSettings settings = FromEnv({{"FLOPSCOPE_COUNTERS", text}});
    EXPECT_FALSE(settings.windows.any) << text;
    EXPECT_EQ(settings.metric_set, MetricSetKind::kFull) << text;  // a bad set= changes nothing
    ASSERT_EQ(settings.warnings.size(), 1u) << text;
    EXPECT_NE(settings.warnings[0].find(std::string("FLOPSCOPE_COUNTERS='") + text + "'"),
              std::string::npos)
        << settings.warnings[0];
    EXPECT_NE(settings.warnings[0].find("no counter windows"), std::string::npos);
  }
}

TEST(CounterSettingsTest, RangesPerDecodeAreBounded) {
  EXPECT_EQ(FromEnv({{"FLOPSCOPE_COUNTER_RANGES", "2048"}}).max_ranges, 2048u);
  const CounterSettings bad = FromEnv({{"FLOPSCOPE_COUNTER_RANGES", "1"}});
  EXPECT_EQ(bad.max_ranges, CounterSettings::kDefaultMaxRanges);
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_NE(bad.warnings[0].find("FLOPSCOPE_COUNTER_RANGES"), std::string::npos);
}

TEST(CounterSettingsTest, TheJobSizeComesFromTheLauncher) {
  EXPECT_EQ(FromEnv({{"WORLD_SIZE", "8"}}).world_size, 8u);
  EXPECT_TRUE(FromEnv({{"WORLD_SIZE", "8"}}).multi_rank());
  EXPECT_EQ(FromEnv({{"OMPI_COMM_WORLD_SIZE", "4"}}).world_size, 4u);
  EXPECT_EQ(FromEnv({{"SLURM_NTASKS", "2"}}).world_size, 2u);
  // WORLD_SIZE first; a malformed one means one process (the identity warns about it).
  EXPECT_EQ(FromEnv({{"WORLD_SIZE", "2"}, {"PMI_SIZE", "16"}}).world_size, 2u);
  EXPECT_EQ(FromEnv({{"WORLD_SIZE", "two"}, {"PMI_SIZE", "16"}}).world_size, 1u);
  EXPECT_EQ(FromEnv({{"WORLD_SIZE", "0"}}).world_size, 1u);
}

}  // namespace
}  // namespace flopscope::injector::cupti
