#include "client/documents/per_rank_export.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "client/testing/json_parse_for_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using ::testing::ElementsAre;
using ::testing::Optional;

Profile TwoModules() {
  Profile profile;
  profile.modules.resize(2);
  profile.modules[0].path = "Net";
  profile.modules[1].path = "Net/head";
  profile.modules[1].depth = 1;
  return profile;
}

RankLatencies Rank(int32_t rank, std::vector<std::pair<std::string, double>> latencies) {
  RankLatencies entry{rank, "", {}};
  for (auto& [path, seconds] : latencies) entry.latency_s[path] = seconds;
  return entry;
}

TEST(ModulesAcrossRanksTest, MedianSpreadAndSlowestOverTheRanksThatRanIt) {
  const std::vector<RankLatencies> ranks = {Rank(0, {{"Net", 3.0}, {"Net/head", 1.0}}),
                                            Rank(1, {{"Net", 5.0}}),
                                            Rank(2, {{"Net", 4.0}, {"Net/head", 2.0}})};
  const std::vector<ModuleAcrossRanks> modules = ModulesAcrossRanks(TwoModules(), ranks);
  ASSERT_EQ(modules.size(), 2u);
  EXPECT_EQ(modules[0].path, "Net");
  EXPECT_THAT(modules[0].latency_s, ElementsAre(3.0, 5.0, 4.0));
  EXPECT_THAT(modules[0].median_s, Optional(4.0));
  EXPECT_THAT(modules[0].spread_s, Optional(5.0 - 3.0));
  EXPECT_THAT(modules[0].slowest_rank, Optional(1));
  // Rank 1 never ran the head: null for it, left out of the median (the lower middle of 1, 2).
  EXPECT_THAT(modules[1].latency_s, ElementsAre(1.0, std::nullopt, 2.0));
  EXPECT_THAT(modules[1].median_s, Optional(1.0));
  EXPECT_THAT(modules[1].slowest_rank, Optional(2));
}

TEST(ModulesAcrossRanksTest, ATieGoesToTheLowerRankAndNoRankMeansNoFigures) {
  const std::vector<RankLatencies> ranks = {Rank(4, {{"Net", 2.0}}), Rank(7, {{"Net", 2.0}}),
                                            RankLatencies{9, "damaged file", {}}};
  const std::vector<ModuleAcrossRanks> modules = ModulesAcrossRanks(TwoModules(), ranks);
  EXPECT_THAT(modules[0].slowest_rank, Optional(4));
  EXPECT_THAT(modules[0].spread_s, Optional(0.0));
  EXPECT_FALSE(modules[1].median_s.has_value());
  EXPECT_FALSE(modules[1].slowest_rank.has_value());
}

TEST(WritePerRankJsonTest, StepTimesComeFromTheStepPhaseInSeconds) {
  flopscope::v1::Report report;
  flopscope::v1::PhaseStats* forward = report.add_phases();
  forward->set_name("forward");
  forward->add_per_step()->set_ns(1);  // not the step phase: left out
  flopscope::v1::PhaseStats* step = report.add_phases();
  step->set_name("step");
  const std::vector<std::tuple<int32_t, int64_t, int64_t>> times = {
      {0, 1, 2'500'000}, {0, 2, 3'000'000}, {3, 1, 4'000'000}};
  for (const auto& [rank, number, ns] : times) {
    flopscope::v1::PhaseStepTime* time = step->add_per_step();
    time->set_rank(rank);
    time->set_step(number);
    time->set_ns(ns);
  }
  JsonWriter json;
  json.BeginObject();
  WritePerRankJson(TwoModules(), {Rank(0, {{"Net", 0.5}}), Rank(3, {})}, report, json);
  json.EndObject();
  absl::StatusOr<std::map<std::string, std::string>> flat = testing::FlattenJson(json.Finish());
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << "python3 is needed to parse JSON";
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->at("per_rank.ranks#"), "2");
  EXPECT_EQ(flat->at("per_rank.ranks[1].rank"), "3");
  EXPECT_EQ(flat->at("per_rank.modules[0].latency_s[0]"), absl::StrCat(0.5));
  EXPECT_EQ(flat->at("per_rank.modules[0].latency_s[1]"), "null");
  EXPECT_EQ(flat->at("per_rank.modules[0].slowest_rank"), "0");
  EXPECT_EQ(flat->at("per_rank.modules[1].slowest_rank"), "null");
  EXPECT_EQ(flat->at("per_rank.step_time_s#"), "2");
  for (size_t i = 0; i < times.size(); ++i) {
    const auto& [rank, number, ns] = times[i];
    const std::string line = rank == 0 ? "per_rank.step_time_s[0]" : "per_rank.step_time_s[1]";
    const size_t at = rank == 0 ? i : 0;
    EXPECT_EQ(flat->at(absl::StrCat(line, ".rank")), absl::StrCat(rank));
    EXPECT_EQ(flat->at(absl::StrCat(line, ".steps[", at, "]")), absl::StrCat(number));
    EXPECT_EQ(flat->at(absl::StrCat(line, ".s[", at, "]")), absl::StrCat(ns / 1e9));
  }
  EXPECT_EQ(flat->at("per_rank.step_time_truncated"), "false");
}

}  // namespace
}  // namespace flopscope::client
