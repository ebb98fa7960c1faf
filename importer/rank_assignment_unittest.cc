#include "importer/rank_assignment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace flopscope::importer {
namespace {

std::vector<int32_t> Ranks(const absl::StatusOr<std::vector<RankChoice>>& choices) {
  std::vector<int32_t> ranks;
  for (const RankChoice& choice : *choices) ranks.push_back(choice.rank);
  return ranks;
}

TEST(AssignRanksTest, TracesSayTheirRanks) {
  auto choices = AssignRanks({"a", "b"}, {1, 0}, std::nullopt);
  ASSERT_TRUE(choices.ok());
  EXPECT_EQ(Ranks(choices), (std::vector<int32_t>{1, 0}));
  EXPECT_FALSE((*choices)[0].assumed);
}

TEST(AssignRanksTest, FilesWithoutRankTakeFreeRanks) {
  auto choices = AssignRanks({"a", "b", "c"}, {std::nullopt, 0, std::nullopt}, std::nullopt);
  ASSERT_TRUE(choices.ok());
  EXPECT_EQ(Ranks(choices), (std::vector<int32_t>{1, 0, 2}));
  EXPECT_TRUE((*choices)[0].assumed);
}

TEST(AssignRanksTest, FlagWinsAndCountsUp) {
  auto choices = AssignRanks({"a", "b"}, {5, 5}, 3);
  ASSERT_TRUE(choices.ok());
  EXPECT_EQ(Ranks(choices), (std::vector<int32_t>{3, 4}));
}

TEST(AssignRanksTest, TwoFilesOnOneRankIsAnError) {
  auto choices = AssignRanks({"a.json", "b.json"}, {2, 2}, std::nullopt);
  ASSERT_FALSE(choices.ok());
  EXPECT_THAT(choices.status().message(), ::testing::HasSubstr("a.json and b.json"));
  EXPECT_FALSE(AssignRanks({"a"}, {std::nullopt}, -1).ok());
}

}  // namespace
}  // namespace flopscope::importer
