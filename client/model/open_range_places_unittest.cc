#include "client/model/open_range_places.h"

#include "client/text/where_view.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using flopscope::v1::OpenRangesResponse;
using flopscope::v1::RankOpenRanges;
using flopscope::v1::ThreadOpenStack;

constexpr int64_t kWhereNow = int64_t{1'800'000'000} * 1'000'000'000;
constexpr int64_t kWhereSecondNs = 1'000'000'000;

// A range opened `seconds` before kWhereNow.
void OpenAgo(google::protobuf::RepeatedPtrField<v1::OpenRangeAt>* stack, const std::string& path,
             double seconds) {
  v1::OpenRangeAt* range = stack->Add();
  range->set_path(path);
  range->set_start_ns(kWhereNow - static_cast<int64_t>(seconds * kWhereSecondNs));
}

RankOpenRanges& AddWhereRank(OpenRangesResponse& response, int32_t rank, bool connected = true) {
  RankOpenRanges& entry = *response.add_ranks();
  entry.set_rank(rank);
  entry.set_connected(connected);
  entry.set_has_snapshot(true);
  entry.set_snapshot_ns(kWhereNow - kWhereSecondNs / 2);
  return entry;
}

// A training thread: step opened `step_s` ago, a phase under it, modules under that.
ThreadOpenStack& WhereThread(RankOpenRanges& rank, uint64_t id, double step_s,
                             const std::string& phase, double phase_s,
                             const std::vector<std::pair<std::string, double>>& modules) {
  ThreadOpenStack& thread = *rank.add_threads();
  thread.set_thread_id(id);
  OpenAgo(thread.mutable_phases(), "step", step_s);
  OpenAgo(thread.mutable_phases(), "step/" + phase, phase_s);
  thread.set_phase_depth(2);
  for (const auto& [path, age] : modules) OpenAgo(thread.mutable_modules(), path, age);
  thread.set_module_depth(static_cast<uint32_t>(modules.size()));
  return thread;
}

OpenRangesResponse HangOfRank1() {
  // Ranks 0 and 2 wait in their backward (DDP's all-reduce opens no range); rank 1 sleeps in
  // Net/slowed's forward.
  OpenRangesResponse response;
  response.set_now_ns(kWhereNow);
  WhereThread(AddWhereRank(response, 0), 100, 14.0, "backward", 12.1, {});
  WhereThread(AddWhereRank(response, 1), 200, 14.1, "forward", 13.9,
              {{"Net", 13.8}, {"Net/slowed", 12.3}});
  WhereThread(AddWhereRank(response, 2), 300, 14.2, "backward", 12.0, {});
  return response;
}

TEST(OpenRangePlacesTest, TheRankOutOfPlaceIsFlagged) {
  const WhereAnswer answer = PlaceRanks(HangOfRank1());
  ASSERT_EQ(answer.groups.size(), 2u);
  EXPECT_EQ(answer.groups[0].ranks, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(answer.groups[0].phase_path, "step/backward");
  EXPECT_EQ(answer.groups[0].module, "");
  EXPECT_NEAR(answer.groups[0].max_age_s, 12.1, 1e-9);
  EXPECT_EQ(answer.majority.ranks, (std::vector<int32_t>{0, 2}));
  EXPECT_NEAR(answer.majority.age_s, 12.0, 1e-9) << "the least time any of them waits";
  EXPECT_EQ(answer.groups[1].ranks, (std::vector<int32_t>{1}));
  EXPECT_EQ(answer.flagged, (std::vector<int32_t>{1}));
  const RankPlace& slow = answer.ranks[1];
  EXPECT_EQ(slow.module, "Net/slowed");
  EXPECT_EQ(slow.phase, "forward");
  EXPECT_NEAR(slow.age_s, 12.3, 1e-9);
  EXPECT_NEAR(slow.oldest_age_s, 14.1, 1e-9);
  EXPECT_NEAR(slow.snapshot_age_s, 0.5, 1e-9);
  EXPECT_TRUE(slow.flagged);
  EXPECT_FALSE(answer.ranks[0].flagged);

  const std::string text = RenderWhereText("job", answer);
  EXPECT_NE(text.find("rank 1 is not where the others are: in Net/slowed (forward) for 12.3 s; "
                      "ranks 0,2 wait in step/backward for 12.0 s"),
            std::string::npos)
      << text;
}

// DDP's all-reduce waits at the end of the backward, before or after the first layer's backward
// range closes: the waiting ranks differ in module, not in phase, and stay one group.
TEST(OpenRangePlacesTest, TheWaitingRanksAreTogetherByPhaseWhenTheirModulesDiffer) {
  OpenRangesResponse response = HangOfRank1();
  response.mutable_ranks(2)->clear_threads();
  WhereThread(*response.mutable_ranks(2), 300, 14.2, "backward", 12.0, {{"Net/first", 11.9}});
  const WhereAnswer answer = PlaceRanks(response);
  EXPECT_EQ(answer.groups.size(), 3u) << "three exact places";
  EXPECT_EQ(answer.flagged, (std::vector<int32_t>{1}));
  EXPECT_EQ(answer.majority.ranks, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(answer.majority.module, "") << "they differ in module";
  EXPECT_EQ(answer.majority.phase_path, "step/backward");
  EXPECT_NEAR(answer.majority.age_s, 12.0, 1e-9);
}

TEST(OpenRangePlacesTest, AModuleApartInTheSamePhaseIsFlaggedAndOthersInThePhaseAreNot) {
  OpenRangesResponse response;
  response.set_now_ns(kWhereNow);
  // Four ranks in the forward: three in the attention's collective, rank 3 in the mlp.
  for (int rank = 0; rank < 3; ++rank) {
    WhereThread(AddWhereRank(response, rank), rank + 1, 50, "forward", 45,
                {{"Net/layers.11/attn", 40}});
  }
  WhereThread(AddWhereRank(response, 3), 9, 50, "forward", 45, {{"Net/layers.11/mlp", 41}});
  WhereAnswer answer = PlaceRanks(response);
  EXPECT_EQ(answer.flagged, (std::vector<int32_t>{3}));
  EXPECT_EQ(answer.majority.module, "Net/layers.11/attn");
  // A fifth rank in another phase: the phase level decides, and the mlp rank is with the others.
  WhereThread(AddWhereRank(response, 4), 10, 50, "backward", 1, {{"Net/head", 1}});
  answer = PlaceRanks(response);
  EXPECT_EQ(answer.flagged, (std::vector<int32_t>{4}));
  EXPECT_EQ(answer.majority.ranks, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(answer.majority.module, "");
}

TEST(OpenRangePlacesTest, ThePlaceIsTheThreadHoldingTheOldestRange) {
  OpenRangesResponse response;
  response.set_now_ns(kWhereNow);
  RankOpenRanges& rank = AddWhereRank(response, 0);
  // A helper thread with a young range, then the training thread.
  ThreadOpenStack& helper = *rank.add_threads();
  helper.set_thread_id(7);
  OpenAgo(helper.mutable_modules(), "loader", 0.2);
  helper.set_module_depth(1);
  WhereThread(rank, 8, 5.0, "forward", 4.0, {{"Net", 3.0}});
  const WhereAnswer answer = PlaceRanks(response);
  EXPECT_EQ(answer.ranks[0].thread_id, 8u);
  EXPECT_EQ(answer.ranks[0].module, "Net");
  EXPECT_NEAR(answer.ranks[0].age_s, 3.0, 1e-9);
  EXPECT_TRUE(answer.flagged.empty());
}

TEST(OpenRangePlacesTest, NoMajorityFlagsNobody) {
  OpenRangesResponse response;
  response.set_now_ns(kWhereNow);
  WhereThread(AddWhereRank(response, 0), 1, 3, "forward", 2, {{"Net/a", 1}});
  WhereThread(AddWhereRank(response, 1), 2, 3, "forward", 2, {{"Net/b", 1}});
  const WhereAnswer answer = PlaceRanks(response);
  EXPECT_EQ(answer.groups.size(), 2u);
  EXPECT_TRUE(answer.flagged.empty());
  EXPECT_NE(RenderWhereText("job", answer).find("2 places, and no phase or module holds more"),
            std::string::npos);
}

TEST(OpenRangePlacesTest, EndedRanksAreNotGroupedAndSaySo) {
  OpenRangesResponse response;
  response.set_now_ns(kWhereNow);
  AddWhereRank(response, 1, /*connected=*/false);  // its last snapshot: nothing open
  AddWhereRank(response, 0, /*connected=*/false);
  RankOpenRanges& killed = AddWhereRank(response, 2, /*connected=*/false);
  WhereThread(killed, 3, 9, "forward", 8, {{"Net", 7}});
  RankOpenRanges& old = *response.add_ranks();
  old.set_rank(3);
  old.set_connected(true);
  const WhereAnswer answer = PlaceRanks(response);
  ASSERT_EQ(answer.ranks.size(), 4u);
  EXPECT_EQ(answer.ranks[0].rank, 0);
  EXPECT_EQ(answer.ranks[0].state, RankState::kEnded);
  EXPECT_EQ(answer.ranks[2].state, RankState::kGone);
  EXPECT_EQ(answer.ranks[3].state, RankState::kNoSnapshot);
  EXPECT_TRUE(answer.groups.empty());
  EXPECT_TRUE(answer.flagged.empty());
  const std::string text = RenderWhereText("job", answer);
  EXPECT_NE(text.find("No rank is running: nothing is open."), std::string::npos) << text;
  EXPECT_NE(text.find("nothing open at its end"), std::string::npos) << text;
}

TEST(OpenRangePlacesTest, RunningRanksWithNothingOpenAreAPlace) {
  OpenRangesResponse response;
  response.set_now_ns(kWhereNow);
  AddWhereRank(response, 0);
  AddWhereRank(response, 1);
  WhereThread(AddWhereRank(response, 2), 1, 30, "forward", 29, {{"Net", 28}});
  const WhereAnswer answer = PlaceRanks(response);
  ASSERT_EQ(answer.groups.size(), 2u);
  EXPECT_TRUE(answer.groups[0].nothing_open);
  EXPECT_EQ(answer.flagged, (std::vector<int32_t>{2}));
  EXPECT_NE(RenderWhereText("job", answer)
                .find("rank 2 is not where the others are: in Net (forward) for 28.0 s; ranks "
                      "0,1 wait with nothing open"),
            std::string::npos);
}

TEST(OpenRangePlacesTest, JsonNamesEveryRank) {
  const std::string json = RenderWhereJson("job", PlaceRanks(HangOfRank1()));
  EXPECT_NE(json.find("\"flagged\": [\n    1\n  ]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"majority\": {"), std::string::npos) << json;
  EXPECT_NE(json.find("\"module\": \"Net/slowed\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"state\": \"open\""), std::string::npos) << json;
}

}  // namespace
}  // namespace flopscope::client
